"""Planted kernels for the edge cases and contract checks (docs/spec/py-backend.md#edges, #contracts;
tests/edges-py-planted.test.ts). Each is a correct kernel of examples/py-kernels with one defect that
shows only at an edge the generated cases do not reach:

* `nan_partial_chunk`: the chunked Gated DeltaNet of fla_style_ops.py, except that in a partial last
  chunk it factors the key decay exp(b_C - b_i) as exp(b_C) * exp(-b_i). With gates of ordinary
  strength both factors are finite; with saturated gates (log gates of -30 and below) exp(-b_i)
  overflows to inf and exp(b_C) underflows to 0: 0 * inf = NaN in the final state and every output
  after it (a bug class of flash-linear-attention's history).
* `scale_one_default`: the naive delta kernel taking its scale by keyword, which reads scale == 1 as
  "not given" and applies K^-1/2 instead: right at every scale but 1.
* `batched_cu_seqlens`: the chunked DeltaNet of fla_style_ops.py, which, given B > 1 with cu_seqlens,
  runs each batch row as a packed batch of its own instead of refusing the call.
* `batched_cu_seqlens_ok`: the same without the defect (it refuses), for the test's contrast.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
import fla_style_ops as ops  # noqa: E402
from fla_deltanet import DELTANET, GATED_DELTANET  # noqa: E402
from naive_delta import naive_delta  # noqa: E402
from nlc_torch import declared  # noqa: E402


def _chunk_step_factored(q, k, v, g, beta, S, C=ops.CHUNK):
    """fla_style_ops._chunk_step with the partial last chunk's key decay factored (the plant)."""
    B, T, H, K = k.shape
    (q, k, v, g, beta), n, lower, strict, eye = ops.chunked(q, k, v, g, beta, C)
    pad = (-T) % C
    outs = []
    for i in range(n):
        qc, kc, vc, bc = q[:, i], k[:, i], v[:, i], beta[:, i]
        cum = g[:, i].cumsum(-1)
        R = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()
        L = (bc[..., :, None] * R * (kc @ kc.transpose(-1, -2))).masked_fill(~strict, 0)
        A = eye + L
        U = torch.linalg.solve_triangular(A, bc[..., None] * vc, upper=False, unitriangular=True)
        W = torch.linalg.solve_triangular(A, (bc * cum.exp())[..., None] * kc, upper=False, unitriangular=True)
        v_new = U - W @ S
        o = cum.exp()[..., None] * (qc @ S) + (R * (qc @ kc.transpose(-1, -2))).masked_fill(~lower, 0) @ v_new
        last = cum[..., -1:]
        decay = last.exp() * (-cum).exp() if (pad and i == n - 1) else (last - cum).exp()  # the plant: factored in the partial chunk
        S = last.exp()[..., None] * S + (decay[..., None] * kc).transpose(-1, -2) @ v_new
        outs.append(o)
    o = torch.stack(outs, 1).transpose(2, 3).reshape(B, n * C, H, -1)
    return o[:, :T], S


def _nan_partial_chunk(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                       cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return ops._run(_chunk_step_factored, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)


nan_partial_chunk = declared(_nan_partial_chunk, **GATED_DELTANET, chunk_size=ops.CHUNK)
# the same kernel without the plant, declared the same way: the contrast
chunk_gated_delta_rule = declared(ops.chunk_gated_delta_rule, **GATED_DELTANET, chunk_size=ops.CHUNK)

_NAIVE = {**naive_delta.nlc, "scale": {"keyword": "scale", "value": "rsqrt_dk"}}


def _scale_one_default(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    if scale == 1.0:  # the plant: 1 taken for "not given"
        scale = None
    return naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, scale=scale, initial_state=initial_state,
                       output_final_state=output_final_state)


def _naive_rsqrt(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    return naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, scale=scale, initial_state=initial_state,
                       output_final_state=output_final_state)


scale_one_default = declared(_scale_one_default, **_NAIVE)
naive_rsqrt = declared(_naive_rsqrt, **_NAIVE)


def _batched_cu_seqlens(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                        cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    if cu_seqlens is not None and k.shape[0] > 1:  # the plant: each row as a packed batch of its own
        rows = [ops.chunk_delta_rule(q[b:b + 1], k[b:b + 1], v[b:b + 1], beta[b:b + 1], scale, initial_state, output_final_state,
                                     cu_seqlens, use_qk_l2norm_in_kernel) for b in range(k.shape[0])]
        return torch.cat([o for o, _ in rows], 0), rows[-1][1]
    return ops.chunk_delta_rule(q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens, use_qk_l2norm_in_kernel)


batched_cu_seqlens = declared(_batched_cu_seqlens, **DELTANET, chunk_size=ops.CHUNK)
batched_cu_seqlens_ok = declared(ops.chunk_delta_rule, **DELTANET, chunk_size=ops.CHUNK)
