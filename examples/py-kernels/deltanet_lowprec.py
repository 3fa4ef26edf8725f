"""DeltaNet kernels that keep their intermediates in the storage dtype (bf16 or f16), as
production linear-attention kernels do, declared `intermediates: "storage"` so that their
yardstick rounds where such a kernel rounds (docs/spec/precision.md#intermediates).

Two forms of the same rule (our `delta` with α absent, fla's DeltaNet conventions:
examples/py-kernels/fla_deltanet.py), each as bf16 and f16:

* `recurrent_delta_{bf16,f16}`: per token, the prediction kᵀS, the corrected value
  v_new = β (v − kᵀS) and the output o are stored in the low dtype; the state S is carried in f32.
* `chunk_delta_{bf16,f16}`: the WY form per chunk of CHUNK tokens:
      L = strict_tril(diag(β) K Kᵀ),  A = (I + L)⁻¹            (computed in f32, stored low)
      w = A (β ⊙ K),  u = A (β ⊙ V)                              (stored low)
      h = S (the chunk's starting state, stored low for the products that read it)
      v_new = u − w h,  o = scale · (Q h + tril(Q Kᵀ) v_new)     (tril(Q Kᵀ), v_new, o stored low)
      S ← S + Kᵀ v_new                                           (the hand-off, f32)
  the storage points of fla's chunk_delta_rule (A, w, u, h, v_new, o in the input dtype).

Both take q, k raw and L2-normalise them (the normalised q̂, k̂ stored low), apply the query scale
in f32, and return o in the storage dtype and the final state in f32.

"Low dtype in, f32 accumulate, low dtype out" is what a GPU tensor-core matmul does. PyTorch on
the CPU has no f16 matmul (and few f16 element-wise kernels), so every product here is written as
`_mm`: the operands (already low) widened to f32, multiplied and summed in f32, the result rounded
to the low dtype. That rounds at the same points as the GPU kernel; only the order of the f32 sums
differs.

The backward is autograd through this forward: every rounding `x.to(low)` is a cast whose
gradient is rounded back to the dtype of its input, so the gradient of each stored intermediate is
itself held in the low dtype (dv_new, du, dw, dA, dq̂, dk̂), and the state's gradient in f32.

Run:  bun run conformance/cli.ts --backend py:examples/py-kernels/deltanet_lowprec.py:chunk_delta_bf16 --rule delta
"""
import functools

import torch

CHUNK = 16

DECL = {
    "rules": ["delta"], "absent": ["alpha"], "state_layout": "transposed", "names": {"theta": "beta"},
    "bounded": ["theta"], "scale": {"keyword": "scale", "value": "rsqrt_dk"}, "qk_l2norm": "use_qk_l2norm_in_kernel",
    "output_final_state": "output_final_state", "accumulate": "f32", "intermediates": "storage",
}


def _mm(a, b, low):
    """A tensor-core product: low operands, f32 products and sums, the result rounded to `low`."""
    return (a.float() @ b.float()).to(low)


def _l2(x, low):
    x = x.float()
    return (x * torch.rsqrt((x * x).sum(-1, keepdim=True))).to(low)


def _recurrent(q, k, v, beta, S, scale, low, read=lambda k: k):
    """q, k, v [B, H, T, *] and beta [B, H, T] in `low`; S [B, H, K, V] in f32. `read`: the keys the
    prediction reads (deltanet_lowprec_planted.py detaches them)."""
    outs = []
    for t in range(k.shape[2]):
        kt, vt, qt, bt = k[:, :, t:t + 1], v[:, :, t:t + 1], q[:, :, t:t + 1], beta[:, :, t, None, None]
        pred = _mm(read(kt), S, low)                                     # kᵀS, stored low
        v_new = (bt.float() * (vt.float() - pred.float())).to(low)       # β (v − kᵀS), stored low
        S = S + kt.float().transpose(-1, -2) @ v_new.float()             # the state stays f32
        outs.append((scale * (qt.float() @ S)).to(low))
    return torch.cat(outs, 2), S


def _chunked(q, k, v, beta, S, scale, low, read=lambda k: k, C=CHUNK, handoff=1.0):
    """As _recurrent; `read`: the keys K Kᵀ reads; `handoff`: a factor on the state handed to the
    next chunk (1: none; deltanet_lowprec_planted.py plants another)."""
    B, H, T, K = k.shape
    pad = (-T) % C
    if pad:  # padded tokens have k = v = 0 and beta = 0: they leave the state as it is
        z = lambda x: torch.cat([x, x.new_zeros(*x.shape[:2], pad, *x.shape[3:])], 2)
        q, k, v, beta = z(q), z(k), z(v), z(beta)
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device), -1)
    lower = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device))
    eye = torch.eye(C, device=k.device)
    outs = []
    for c0 in range(0, T + pad, C):
        qc, kc, vc, bc = q[:, :, c0:c0 + C], k[:, :, c0:c0 + C], v[:, :, c0:c0 + C], beta[:, :, c0:c0 + C]
        kkt = read(kc).float() @ read(kc).float().transpose(-1, -2)
        L = (bc.float()[..., :, None] * kkt).masked_fill(~strict, 0)
        A = torch.linalg.solve_triangular(eye + L, eye.expand_as(L), upper=False, unitriangular=True).to(low)
        w = _mm(A, (bc[..., None].float() * kc.float()).to(low), low)
        u = _mm(A, (bc[..., None].float() * vc.float()).to(low), low)
        h = S.to(low)
        v_new = (u.float() - w.float() @ h.float()).to(low)
        qk = (qc.float() @ kc.float().transpose(-1, -2)).masked_fill(~lower, 0).to(low)
        outs.append((scale * (qc.float() @ h.float() + qk.float() @ v_new.float())).to(low))
        S = S + kc.float().transpose(-1, -2) @ v_new.float()
        if c0 + C < T + pad:
            S = S * handoff
    return torch.cat(outs, 2)[:, :, :T], S


def _delta_rule(step, low, q, k, v, beta, scale=None, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False):
    """fla's calling convention: q, k [B, T, H, K], v [B, T, H, V], beta [B, T, H]; state [B, H, K, V]."""
    B, T, H, K = k.shape
    if use_qk_l2norm_in_kernel:
        q, k = _l2(q, low), _l2(k, low)
    scale = K ** -0.5 if scale is None else scale
    heads = lambda x: x.transpose(1, 2)  # [B, H, T, ...]
    S0 = q.new_zeros(B, H, K, v.shape[-1], dtype=torch.float32) if initial_state is None else initial_state.float()
    o, S = step(heads(q), heads(k), heads(v), heads(beta), S0, scale, low)
    return heads(o), (S if output_final_state else None)


def kernel(step, low, dtype, **extra):
    """The delta rule in `step` form at storage dtype `low`, with its declaration."""
    fn = functools.partial(_delta_rule, step, low)

    def delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False):
        return fn(q, k, v, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    delta_rule.nlc = {**DECL, "dtype": dtype, **extra}
    return delta_rule


recurrent_delta_bf16 = kernel(_recurrent, torch.bfloat16, "bf16")
recurrent_delta_f16 = kernel(_recurrent, torch.float16, "f16")
chunk_delta_bf16 = kernel(_chunked, torch.bfloat16, "bf16", chunk_size=CHUNK)
chunk_delta_f16 = kernel(_chunked, torch.float16, "f16", chunk_size=CHUNK)
# fla's chunk size: at β ≈ 1 on every token of a 64-token chunk the WY system is ill-conditioned
# (condition ≈ 40), which only a chunked yardstick reproduces (docs/spec/precision.md#intermediates-chunked)
chunk64_delta_bf16 = kernel(functools.partial(_chunked, C=64), torch.bfloat16, "bf16", chunk_size=64)
