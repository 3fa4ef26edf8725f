"""A KDA kernel in plain PyTorch with the signature and switches of fla's `fused_recurrent_kda`
(q, k, v, g, beta, A_log, dt_bias, scale, initial_state, output_final_state,
use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
state_v_first), with a backward (autograd): the worked adaptor of the declaration vocabulary for
kernels as fla ships them (docs/spec/py-backend.md#gate-forms, #constants, #input-dtypes), judged
without fla. examples/py-kernels/fla_new_rules.py declares fla's own kernels with the same lines.

    npx nlc --backend py:examples/py-kernels/kda_torch.py:kda_gate_in_kernel --rule kda
"""
import torch
import torch.nn.functional as F

from fla_deltanet import declared


def kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None, output_final_state=False,
        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
        allow_neg_eigval=False, state_v_first=False, head_param=None):
    """q, k, g [B, T, H, K]; v [B, T, H, V]; beta [B, T, H]; state [B, H, K, V] ([B, H, V, K] value-first).
    `head_param`: the head whose A_log and dt_bias every head reads (None: its own; a planted bug)."""
    B, T, H, K = q.shape
    acc, out_dtype = torch.float32, v.dtype
    q, k, v, g, beta = (x.to(acc) for x in (q, k, v, g, beta))
    if use_qk_l2norm_in_kernel:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    q = q * (K ** -0.5 if scale is None else scale)
    if use_gate_in_kernel:
        a_log, bias = A_log.to(acc), (torch.zeros(H * K, dtype=acc, device=g.device) if dt_bias is None else dt_bias.to(acc))
        if head_param is not None:
            a_log, bias = a_log[head_param].expand(H), bias.view(H, K)[head_param].repeat(H)
        g = -a_log.exp()[:, None] * F.softplus(g + bias.view(H, K))
    if use_beta_sigmoid_in_kernel:
        beta = beta.sigmoid() * (2 if allow_neg_eigval else 1)
    S = torch.zeros(B, H, K, v.shape[-1], dtype=acc, device=q.device) if initial_state is None else initial_state.to(acc)
    if state_v_first:
        S = S.transpose(-1, -2)
    ys = []
    for t in range(T):
        S = g[:, t].exp()[..., None] * S
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t]))
        S = S + k[:, t, :, :, None] * u[:, :, None, :]
        ys.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    y = torch.stack(ys, 1).to(out_dtype)
    if state_v_first:
        S = S.transpose(-1, -2)
    return y, (S if output_final_state else None)


KDA = {"rules": ["kda"], "state_layout": "transposed", "scale": {"keyword": "scale", "value": "rsqrt_dk"},
       "qk_l2norm": "use_qk_l2norm_in_kernel", "output_final_state": "output_final_state", "accumulate": "f32"}
GATE_IN_KERNEL = {"names": {"alpha": "g", "theta": "beta"},
                  "gate_forms": {"alpha": {"form": "softplus", "flag": "use_gate_in_kernel", "A_log": "A_log", "dt_bias": "dt_bias"},
                                 "theta": {"form": "sigmoid", "flag": "use_beta_sigmoid_in_kernel"}}}
NEG_EIGVAL = {"names": GATE_IN_KERNEL["names"], "gate_forms": {
    **GATE_IN_KERNEL["gate_forms"], "theta": {"form": "sigmoid2", "flag": ["use_beta_sigmoid_in_kernel", "allow_neg_eigval"]}}}

# g in log space per key channel, beta in (0, 1): the declaration of fla's fused_recurrent_kda
kda_log_gate = declared(kda, **KDA, names={"theta": "beta"}, log_gates={"alpha": "g"}, bounded=["theta"])
# g = -exp(A_log) softplus(raw + dt_bias) and beta = sigmoid(raw) computed inside
kda_gate_in_kernel = declared(kda, **KDA, **GATE_IN_KERNEL)
# beta = 2 sigmoid(raw) in (0, 2): negative eigenvalues
kda_neg_eigval = declared(kda, **KDA, **NEG_EIGVAL)
# the state stored value-first ([B, H, V, K], our layout), a constant keyword
kda_v_first = declared(kda, **{**KDA, "state_layout": "ours"}, names={"theta": "beta"}, log_gates={"alpha": "g"}, bounded=["theta"],
                       constants={"state_v_first": True})
# bf16 q, k, v with f32 gates, as fla is used in training
kda_bf16_f32_gates = declared(kda, **KDA, **GATE_IN_KERNEL, dtype="bf16", input_dtypes={"alpha": "f32", "theta": "f32"})
