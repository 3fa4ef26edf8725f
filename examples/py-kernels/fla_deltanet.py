"""Adaptors for DeltaNet and Gated DeltaNet kernels in flash-linear-attention's conventions
(fla_style_ops.py; the same lines declare fla's own `fla.ops.delta_rule` / `fla.ops.gated_delta_rule`
ops): a declaration each, no arithmetic (docs/spec/py-backend.md#conventions).

    bun run conformance/cli.ts --backend py:examples/py-kernels/fla_deltanet.py:chunk_gated_delta_rule --rule gated_delta

* DeltaNet is the reference's `delta` with no retention gate: alpha is declared absent, so the
  harness generates alpha = 0, does not send it and does not compare its gradient.
* Gated DeltaNet is `gated_delta`; the kernel takes the decay in log space, g = log(1 − alpha).
* beta (our theta) is a step size in (0, 1); the query scale is K^-1/2, passed through `scale`;
  q and k are passed raw and normalised inside (`use_qk_l2norm_in_kernel`).
* the state is [N, H, K, V] (transposed); bf16 inputs give bf16 outputs with the state kept in f32.
* packed variable-length batches: `cu_seqlens` (B = 1, one state per sequence), so the harness also
  judges them on packed batches (docs/spec/py-backend.md#packed).
"""
import fla_style_ops as ops  # the adaptor's own folder is on sys.path
from nlc_torch import declared  # the kernel host puts nl-conformance's python/ on sys.path

FLA = {
    "state_layout": "transposed",
    "names": {"theta": "beta"},
    "bounded": ["theta"],
    "scale": {"keyword": "scale", "value": "rsqrt_dk"},
    "qk_l2norm": "use_qk_l2norm_in_kernel",
    "output_final_state": "output_final_state",
    "outputs": {"y": "o", "M": "final_state"},
    "accumulate": "f32",
    "varlen": "cu_seqlens",
}
DELTANET = {**FLA, "rules": ["delta"], "absent": ["alpha"]}
GATED_DELTANET = {**FLA, "rules": ["gated_delta"], "log_gates": {"alpha": "g"}}


fused_recurrent_delta_rule = declared(ops.fused_recurrent_delta_rule, **DELTANET)
chunk_delta_rule = declared(ops.chunk_delta_rule, **DELTANET, chunk_size=ops.CHUNK)
fused_recurrent_gated_delta_rule = declared(ops.fused_recurrent_gated_delta_rule, **GATED_DELTANET)
chunk_gated_delta_rule = declared(ops.chunk_gated_delta_rule, **GATED_DELTANET, chunk_size=ops.CHUNK)

fused_recurrent_delta_rule_bf16 = declared(ops.fused_recurrent_delta_rule, **DELTANET, dtype="bf16")
chunk_delta_rule_bf16 = declared(ops.chunk_delta_rule, **DELTANET, dtype="bf16", chunk_size=ops.CHUNK)
fused_recurrent_gated_delta_rule_bf16 = declared(ops.fused_recurrent_gated_delta_rule, **GATED_DELTANET, dtype="bf16")
chunk_gated_delta_rule_bf16 = declared(ops.chunk_gated_delta_rule, **GATED_DELTANET, dtype="bf16", chunk_size=ops.CHUNK)
