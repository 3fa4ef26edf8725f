"""A Gated DeltaNet that keeps its intermediates in its bf16 or f16 storage dtype (q̂, k̂, the
prediction kᵀS, the corrected value and the output rounded to it, the state in f32), as production
kernels do. Correct, yet declared plainly it FAILS the low-precision judge: that yardstick, the
plain reference in f32 rounded once at the end, does not make those roundings
(docs/spec/py-backend.md#intermediates). Declared `intermediates: "storage"`
(docs/spec/precision.md#intermediates) it is judged against a yardstick that keeps the same values
in the storage dtype, and passes.

Planted wrong variants of the declared kernels (each must FAIL its backward; the forward is correct):
`*_dbeta_scaled` scales dβ (our dθ) by 1 + 1/128, `*_dk_dropped` detaches the keys the prediction
kᵀS reads, so one term of dk is missing.
"""
import functools

import fla_style_ops as ops
from deltanet_lowprec_planted import _ScaledGrad  # dβ scaled by 1 + 1/128 in f32, rounded to the storage dtype
from fla_deltanet import GATED_DELTANET
from nlc_torch import declared

fused_recurrent_gated_delta_rule_storage_bf16 = declared(ops.fused_recurrent_gated_delta_rule_storage, **GATED_DELTANET, dtype="bf16")
fused_recurrent_gated_delta_rule_storage_bf16_stored = declared(ops.fused_recurrent_gated_delta_rule_storage, **GATED_DELTANET,
                                                                dtype="bf16", intermediates="storage")
fused_recurrent_gated_delta_rule_storage_f16_stored = declared(ops.fused_recurrent_gated_delta_rule_storage, **GATED_DELTANET,
                                                               dtype="f16", intermediates="storage")


def _planted(dtype, plant):
    step = ops._recurrent_step_storage
    if plant == "dk_dropped":
        step = functools.partial(step, read=lambda k: k.detach())

    def fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                         cu_seqlens=None, use_qk_l2norm_in_kernel=False):
        if plant == "dbeta_scaled":
            beta = _ScaledGrad.apply(beta)
        return ops._run(step, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                        use_qk_l2norm_in_kernel, upcast=False)
    fused_recurrent_gated_delta_rule.nlc = {**GATED_DELTANET, "dtype": dtype, "intermediates": "storage"}
    return fused_recurrent_gated_delta_rule


for _dtype in ("bf16", "f16"):
    for _plant in ("dbeta_scaled", "dk_dropped"):
        globals()[f"fused_recurrent_gated_delta_rule_storage_{_dtype}_stored_{_plant}"] = _planted(_dtype, _plant)
