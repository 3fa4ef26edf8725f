"""DeltaNet and Gated DeltaNet kernels in plain PyTorch, written the way flash-linear-attention
ships them: the same signatures and conventions, no knowledge of this suite. The adaptor that
declares them to `--backend py:` is fla_deltanet.py (a few lines of `nlc`, no arithmetic).

Conventions (those of fla's `fused_recurrent_*` and `chunk_*` ops):
* q, k [B, T, H, K], v [B, T, H, V], beta [B, T, H] (the step size), g [B, T, H]: the decay in
  log space, g_t = log a_t (Gated DeltaNet only);
* the state S [N, H, K, V] (keys first: the transpose of the reference's M [d_v, d_k]), o_t = S_tᵀ (scale q_t),
  scale defaulting to K^-1/2;
* `use_qk_l2norm_in_kernel`: q and k arrive raw and are L2-normalised here;
* `cu_seqlens`: with B = 1, sequences packed along T, boundaries cu_seqlens[0] = 0 <= ... <= cu_seqlens[N] = T,
  one initial and one final state per sequence (two equal offsets: an empty sequence, whose final state
  is its initial state);
* inputs in any float dtype; the arithmetic runs in f32, o is returned in the inputs' dtype and the
  final state in f32.

Recurrence (Gated DeltaNet; DeltaNet is g = 0):
    S_t = a_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ,   a_t = exp(g_t)
The chunked forms compute the same with the WY (UT-transform) representation per chunk of CHUNK tokens.
"""
import torch

CHUNK = 16


def _l2(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True))


def _segments(T, cu_seqlens):
    if cu_seqlens is None:
        return None
    cu = [int(c) for c in cu_seqlens.tolist()]
    if cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must not decrease from 0 to T = {T}, got {cu}")
    return list(zip(cu, cu[1:]))


def _run(step, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel, upcast=True):
    """Shared driver: dtype, normalisation, scale and packed sequences around one [B, T, H, *] `step`.
    `upcast=False`: the inputs stay in their dtype (a step that keeps its intermediates in it)."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    dtype = q.dtype
    if upcast:
        q, k, v, beta = q.float(), k.float(), v.float(), beta.float()
    g = torch.zeros_like(beta) if g is None else g.to(beta.dtype)
    low = q.dtype  # f32 when upcast; else the storage dtype, which a kernel writes q and k back in
    if use_qk_l2norm_in_kernel:  # normalised in f32 (as fla's l2norm kernel), stored once
        q, k = _l2(q.float()).to(low), _l2(k.float()).to(low)
    q = (q.float() * (K ** -0.5 if scale is None else scale)).to(low)  # scaled in f32, stored once
    segs = _segments(T, cu_seqlens)
    if segs is None:
        S0 = q.new_zeros(B, H, K, V, dtype=torch.float32) if initial_state is None else initial_state.float()
        o, S = step(q, k, v, g, beta, S0)
    else:
        if B != 1:
            raise ValueError(f"cu_seqlens needs B = 1, got B = {B}")
        outs, finals = [], []
        for n, (a, b) in enumerate(segs):
            S0 = q.new_zeros(1, H, K, V, dtype=torch.float32) if initial_state is None else initial_state[n:n + 1].float()
            if a == b:  # an empty sequence: no outputs, its state handed through
                outs.append(q.new_zeros(1, 0, H, V))
                finals.append(S0)
                continue
            o_n, S_n = step(q[:, a:b], k[:, a:b], v[:, a:b], g[:, a:b], beta[:, a:b], S0)
            outs.append(o_n)
            finals.append(S_n)
        o, S = torch.cat(outs, 1), torch.cat(finals, 0)
    return o.to(dtype), (S if output_final_state else None)


def _recurrent_step(q, k, v, g, beta, S):
    outs = []
    for t in range(k.shape[1]):
        S = S * g[:, t, :, None, None].exp()
        kt, vt, qt, bt = k[:, t], v[:, t], q[:, t], beta[:, t, :, None]
        v_new = bt * (vt - torch.einsum("bhk,bhkv->bhv", kt, S))
        S = S + torch.einsum("bhk,bhv->bhkv", kt, v_new)
        outs.append(torch.einsum("bhk,bhkv->bhv", qt, S))
    return torch.stack(outs, 1), S


def chunked(q, k, v, g, beta, C):
    """The inputs padded to whole chunks of C and split into [B, n, H, C, ...], with the chunk count n and the
    masks of a chunk step (lower, strict lower, identity). Padded steps have k = v = 0, beta = 0, g = 0: they leave
    the state as it is."""
    B, T, H, K = k.shape
    pad = (-T) % C
    if pad:
        z = lambda x: torch.cat([x, x.new_zeros(B, pad, *x.shape[2:])], 1)
        q, k, v, g, beta = z(q), z(k), z(v), z(g), z(beta)
    n = (T + pad) // C
    to_chunks = lambda x: x.reshape(B, n, C, H, *x.shape[3:]).transpose(2, 3)  # [B, n, H, C, ...]
    lower = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device))
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=k.device), -1)
    eye = torch.eye(C, dtype=k.dtype, device=k.device)
    return tuple(map(to_chunks, (q, k, v, g, beta))), n, lower, strict, eye


def _chunk_step(q, k, v, g, beta, S, C=CHUNK):
    """The WY form per chunk: with b_i the within-chunk cumulative log decay and R_ij = exp(b_i − b_j) (j ≤ i),
    (I + L) U = β ⊙ V and (I + L) W = β ⊙ exp(b) ⊙ K, L_ij = β_i R_ij k_i·k_j (j < i), so that the
    corrected values are v_new = U − W S, the outputs o = exp(b) ⊙ (Q S) + (R ⊙ Q Kᵀ)_{j≤i} v_new and the
    state S ← exp(b_C) S + (exp(b_C − b) ⊙ K)ᵀ v_new."""
    B, T, H, K = k.shape
    (q, k, v, g, beta), n, lower, strict, eye = chunked(q, k, v, g, beta, C)
    outs = []
    for i in range(n):
        qc, kc, vc, bc = q[:, i], k[:, i], v[:, i], beta[:, i]
        cum = g[:, i].cumsum(-1)                                            # [B, H, C]
        R = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()
        L = (bc[..., :, None] * R * (kc @ kc.transpose(-1, -2))).masked_fill(~strict, 0)
        A = eye + L
        U = torch.linalg.solve_triangular(A, bc[..., None] * vc, upper=False, unitriangular=True)
        W = torch.linalg.solve_triangular(A, (bc * cum.exp())[..., None] * kc, upper=False, unitriangular=True)
        v_new = U - W @ S
        o = cum.exp()[..., None] * (qc @ S) + (R * (qc @ kc.transpose(-1, -2))).masked_fill(~lower, 0) @ v_new
        last = cum[..., -1:]                                                # [B, H, 1]
        S = last.exp()[..., None] * S + ((last - cum).exp()[..., None] * kc).transpose(-1, -2) @ v_new
        outs.append(o)
    o = torch.stack(outs, 1).transpose(2, 3).reshape(B, n * C, H, -1)
    return o[:, :T], S


def _recurrent_step_storage(q, k, v, g, beta, S, read=lambda k: k):
    """The recurrent step keeping its intermediates in the inputs' dtype (bf16): the prediction kᵀS,
    the corrected value v_new and the output are rounded to it; the state S stays in f32.
    `read`: the keys the prediction reads (a planted variant detaches them)."""
    lp = q.dtype
    outs = []
    for t in range(k.shape[1]):
        S = S * g[:, t, :, None, None].float().exp()
        kt, vt, qt, bt = k[:, t], v[:, t], q[:, t], beta[:, t, :, None]
        v_new = bt * (vt - torch.einsum("bhk,bhkv->bhv", read(kt).float(), S).to(lp))
        S = S + torch.einsum("bhk,bhv->bhkv", kt.float(), v_new.float())
        outs.append(torch.einsum("bhk,bhkv->bhv", qt.float(), S).to(lp))
    return torch.stack(outs, 1), S


def fused_recurrent_gated_delta_rule_storage(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                             cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    """fused_recurrent_gated_delta_rule with bf16 intermediates (as production kernels keep them)."""
    return _run(_recurrent_step_storage, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                use_qk_l2norm_in_kernel, upcast=False)


def fused_recurrent_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return _run(_recurrent_step, q, k, v, None, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return _run(_chunk_step, q, k, v, None, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)


def fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                     cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return _run(_recurrent_step, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return _run(_chunk_step, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)
