"""Planted wrong variants of fla's chunked bf16 DeltaNet declared with its bf16 intermediates
(fla_real.py's `chunk_delta_rule_bf16_stored`); each must FAIL, against the chunked storage
yardstick (docs/spec/precision.md#intermediates-chunked) as against the per-token one:

* `chunk_delta_rule_bf16_stored_handoff`: the state handed from the first chunk of 64 tokens to the
  rest scaled by 1 + 1/128 (fla called on tokens [0, 64) and then on [64, T) with the first call's
  final state × (1 + 1/128) as the second's initial state). Inert where T ≤ 64; the declared case
  T = C + 1 runs first.
* `chunk_delta_rule_bf16_stored_dbeta_1003`: dβ (our dθ) × 1.003, the forward untouched.

Packed batches are not declared (the hand-off plant splits along T).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fla.ops.delta_rule import chunk_delta_rule as _chunk_delta_rule  # noqa: E402

from fla_deltanet import DELTANET  # noqa: E402
from fla_real import FLA_CHUNK  # noqa: E402

DECL = {**{k: v for k, v in DELTANET.items() if k != "varlen"}, "dtype": "bf16", "chunk_size": FLA_CHUNK,
        "intermediates": "storage"}


class _ScaledGrad(torch.autograd.Function):
    """Identity forward; the backward scales the gradient in f32 and returns it in the input's dtype."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return (g.float() * ctx.factor).to(g.dtype), None


def chunk_delta_rule_bf16_stored_handoff(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False):
    T = q.shape[1]
    if T <= FLA_CHUNK:
        return _chunk_delta_rule(q, k, v, beta, scale=scale, initial_state=initial_state,
                                 output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    head = slice(None), slice(0, FLA_CHUNK)
    tail = slice(None), slice(FLA_CHUNK, T)
    o1, S1 = _chunk_delta_rule(q[head], k[head], v[head], beta[head], scale=scale, initial_state=initial_state,
                               output_final_state=True, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    o2, S2 = _chunk_delta_rule(q[tail], k[tail], v[tail], beta[tail], scale=scale, initial_state=S1 * (1 + 1 / 128),
                               output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    return torch.cat([o1, o2], 1), S2


chunk_delta_rule_bf16_stored_handoff.nlc = DECL


def chunk_delta_rule_bf16_stored_dbeta_1003(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                                            use_qk_l2norm_in_kernel=False):
    return _chunk_delta_rule(q, k, v, _ScaledGrad.apply(beta, 1.003), scale=scale, initial_state=initial_state,
                             output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


chunk_delta_rule_bf16_stored_dbeta_1003.nlc = DECL
