"""An RWKV-6 kernel in plain PyTorch with the signature of fla's `fused_recurrent_rwkv6` (r, k, v, w, u,
scale, initial_state, output_final_state, cu_seqlens): the bonus u [H, K] is one vector per head, the
same at every token and in every sequence. Declared with `per_head` (docs/spec/py-backend.md#per-head),
judged without fla; examples/py-kernels/fla_linear_attention.py declares fla's own kernels with the
same lines. A backward by autograd.

    npx nlc --backend py:examples/py-kernels/rwkv6_torch.py:rwkv6 --rule rwkv6
"""
import torch

from nlc_torch import declared

RWKV6 = {"rules": ["rwkv6"], "state_layout": "transposed", "names": {"q": "r", "theta": "u"}, "log_gates": {"alpha": "w"},
         "per_head": ["theta"], "scale": {"keyword": "scale", "value": "rsqrt_dk"}, "output_final_state": "output_final_state",
         "outputs": {"y": "o", "M": "final_state"}, "varlen": "cu_seqlens"}


def _rwkv6(r, k, v, w, u, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    """r, k, w [B, T, H, K]; v [B, T, H, V]; u [H, K]; state [N, H, K, V]:
    o_t = (S_{t-1} + diag(u) k_t v_t^T)^T (scale r_t), then S_t = diag(exp w_t) S_{t-1} + k_t v_t^T."""
    B, T, H, K = r.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    bounds = [(b, 0, T) for b in range(B)] if cu_seqlens is None else \
        [(0, int(cu_seqlens[i]), int(cu_seqlens[i + 1])) for i in range(len(cu_seqlens) - 1)]
    acc = torch.float32
    outs, finals = [], []
    for n, (b, s, e) in enumerate(bounds):
        S = torch.zeros(H, K, V, dtype=acc, device=r.device) if initial_state is None else initial_state[n].to(acc)
        for t in range(s, e):
            q_t, k_t, v_t, w_t = (x[b, t].to(acc) for x in (r, k, v, w))
            kv = k_t[:, :, None] * v_t[:, None, :]
            outs.append(torch.einsum("hkv,hk->hv", S + u.to(acc)[:, :, None] * kv, scale * q_t))
            S = w_t.exp()[:, :, None] * S + kv
        finals.append(S)
    o = torch.stack(outs).reshape(B, T, H, V) if outs else v.new_zeros(B, T, H, V, dtype=acc)
    return o.to(v.dtype), (torch.stack(finals) if output_final_state else None)


def rwkv6(r, k, v, w, u, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
    return _rwkv6(r, k, v, w, u, scale, initial_state, output_final_state, cu_seqlens)


rwkv6 = declared(rwkv6, **RWKV6)
