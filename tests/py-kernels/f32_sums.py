"""f32 PyTorch kernels that declare nothing about their sums (docs/spec/py-backend.md#accumulate):
flash-linear-attention's chunked Gated DeltaNet as examples/py-kernels/fla_style_ops.py has it,
f32 in and out, its matrix products summed in f32 as torch sums f32 tensors.

* `chunk_gated`: correct, no `accumulate` key: judged as summing in f32 (the default), passes;
* `chunk_gated_f64_declared`: the same kernel declaring `"accumulate": "f64"`: held to the f64-sum
  floor it does not meet (its dα is a sum that cancels), fails;
* `chunk_gated_dg_scaled`, `chunk_gated_y_scaled`: planted 0.1% scale errors on dg (our dα) and on
  y: still fail under the default.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
import fla_style_ops as ops  # noqa: E402
from fla_deltanet import GATED_DELTANET  # noqa: E402
from nlc_torch import declared  # noqa: E402

F32_UNDECLARED = {k: v for k, v in GATED_DELTANET.items() if k != "accumulate"}
PLANT = 1.001


class _ScaledGrad(torch.autograd.Function):
    """Identity forward; the backward scales the incoming gradient."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


chunk_gated = declared(ops.chunk_gated_delta_rule, **F32_UNDECLARED, chunk_size=ops.CHUNK)
chunk_gated_f64_declared = declared(ops.chunk_gated_delta_rule, **F32_UNDECLARED, chunk_size=ops.CHUNK, accumulate="f64")


def chunk_gated_dg_scaled(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                          cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    g = _ScaledGrad.apply(g, PLANT)                                   # planted: dg x 1.001
    return ops.chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                                      use_qk_l2norm_in_kernel)


def chunk_gated_y_scaled(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                         cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    o, S = ops.chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                                      use_qk_l2norm_in_kernel)
    return o * PLANT, S                                               # planted: y x 1.001


chunk_gated_dg_scaled.nlc = {**F32_UNDECLARED, "chunk_size": ops.CHUNK}
chunk_gated_y_scaled.nlc = {**F32_UNDECLARED, "chunk_size": ops.CHUNK}
