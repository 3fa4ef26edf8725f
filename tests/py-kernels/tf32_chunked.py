"""A chunked Gated DeltaNet whose matrix products run as TF32 tensor cores run them
(docs/spec/precision.md#tf32): every operand of every product (forward and backward) cut to TF32
(10 explicit mantissa bits, the rest dropped, as tensor cores take f32 operands), sums in f32;
everything else f32. The chunked form is examples/py-kernels/fla_style_ops.py's,
flash-linear-attention's WY form.

* `chunk_gated_tf32`: declares `"accumulate": "tf32"`: passes;
* `chunk_gated_tf32_nearest`: the same with operands rounded to nearest (a kernel that converts
  them first), declared tf32: passes;
* `chunk_gated_tf32_as_f32`: the same kernel declaring f32 sums: fails (its products round 8192
  times coarser than f32's);
* `chunk_gated_tf32_dg_scaled`, `chunk_gated_tf32_y_scaled`: planted 1 % scale errors on dg (our
  dα) and on y, declared tf32: still fail.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
import fla_style_ops as ops  # noqa: E402
from fla_deltanet import GATED_DELTANET  # noqa: E402
from fla_deltanet_planted import _ScaledGrad  # noqa: E402  (identity forward, a scaled gradient)
from nlc_torch import declared  # noqa: E402

PLANT = 1.01
F32 = {k: v for k, v in GATED_DELTANET.items() if k != "accumulate"}


def tf32(x):
    """x (f32) as a tensor core takes it in TF32: the low 13 of f32's 23 mantissa bits cut off (toward zero)."""
    b = x.contiguous().view(torch.int32)
    return (b & ~0x1FFF).view(torch.float32)


def tf32_nearest(x):
    """x (f32) rounded to TF32 to nearest, ties to even (what a kernel that converts its operands first does)."""
    b = x.contiguous().view(torch.int32)
    b = (b + 0xFFF + ((b >> 13) & 1)) & ~0x1FFF
    return b.view(torch.float32)


def _matmul(rnd):
    """a @ b with both operands through rnd (TF32), and the backward's two products likewise."""

    class _MatmulTF32(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return rnd(a) @ rnd(b)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            g = rnd(g)
            return g @ rnd(b).transpose(-1, -2), rnd(a).transpose(-1, -2) @ g

    return _MatmulTF32.apply


mm = _matmul(tf32)
mm_nearest = _matmul(tf32_nearest)


def _chunk_step_tf32(q, k, v, g, beta, S, C=ops.CHUNK, mm=mm):
    """fla_style_ops._chunk_step with every matrix product through mm (TF32 operands, f32 sums)."""
    B, T, H, K = k.shape
    (q, k, v, g, beta), n, lower, strict, eye = ops.chunked(q, k, v, g, beta, C)
    outs = []
    for i in range(n):
        qc, kc, vc, bc = q[:, i], k[:, i], v[:, i], beta[:, i]
        cum = g[:, i].cumsum(-1)
        R = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()
        L = (bc[..., :, None] * R * mm(kc, kc.transpose(-1, -2))).masked_fill(~strict, 0)
        A = eye + L
        U = torch.linalg.solve_triangular(A, bc[..., None] * vc, upper=False, unitriangular=True)
        W = torch.linalg.solve_triangular(A, (bc * cum.exp())[..., None] * kc, upper=False, unitriangular=True)
        v_new = U - mm(W, S)
        o = cum.exp()[..., None] * mm(qc, S) + mm((R * mm(qc, kc.transpose(-1, -2))).masked_fill(~lower, 0), v_new)
        last = cum[..., -1:]
        S = last.exp()[..., None] * S + mm(((last - cum).exp()[..., None] * kc).transpose(-1, -2), v_new)
        outs.append(o)
    o = torch.stack(outs, 1).transpose(2, 3).reshape(B, n * C, H, -1)
    return o[:, :T], S


def chunk_gated_delta_rule_tf32(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return ops._run(_chunk_step_tf32, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                    use_qk_l2norm_in_kernel)


def chunk_gated_delta_rule_tf32_nearest(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                        cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    def step(q, k, v, g, beta, S, C=ops.CHUNK):
        return _chunk_step_tf32(q, k, v, g, beta, S, C, mm=mm_nearest)
    return ops._run(step, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                    use_qk_l2norm_in_kernel)


chunk_gated_tf32_nearest = declared(chunk_gated_delta_rule_tf32_nearest, **F32, chunk_size=ops.CHUNK, accumulate="tf32")
chunk_gated_tf32 = declared(chunk_gated_delta_rule_tf32, **F32, chunk_size=ops.CHUNK, accumulate="tf32")
chunk_gated_tf32_as_f32 = declared(chunk_gated_delta_rule_tf32, **F32, chunk_size=ops.CHUNK, accumulate="f32")


def chunk_gated_tf32_dg_scaled(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    g = _ScaledGrad.apply(g, PLANT)                                   # planted: dg x PLANT
    return chunk_gated_delta_rule_tf32(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                                       use_qk_l2norm_in_kernel)


def chunk_gated_tf32_y_scaled(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                              cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    o, S = chunk_gated_delta_rule_tf32(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                                       use_qk_l2norm_in_kernel)
    return o * PLANT, S                                               # planted: y x PLANT


chunk_gated_tf32_dg_scaled.nlc = {**F32, "chunk_size": ops.CHUNK, "accumulate": "tf32"}
chunk_gated_tf32_y_scaled.nlc = {**F32, "chunk_size": ops.CHUNK, "accumulate": "tf32"}
