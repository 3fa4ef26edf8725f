"""flash-linear-attention's GDN2 and gated Oja kernels (fla-core 0.5.2), each declared and nothing
else (docs/spec/py-backend.md#fla-ttt):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npx nlc --backend py:examples/py-kernels/fla_gdn2_oja.py:chunk_gdn2 --rule gdn2

* GDN2 (`gdn2`, docs/spec/delta-family-2.md#gdn2): fla's g [B, T, H, K] is the decay per key channel
  in log space (a channel α, `log_gates`), b [B, T, H, K] the erase gate per key channel (our θ),
  w [B, T, H, V] the write gate per value channel (our η). The state is [N, H, K, V] (transposed).
* Gated Oja (`gated_oja`, docs/spec/delta-family-2.md#gated-oja): fla's gv [B, T, H, V] is the decay
  per value channel in log space (our α, a channel gate of the value channels), beta [B, T, H] the
  step (our θ); its state h [N, H, K, V] is our Mᵀ (decisions.md#gated-oja-layout).

q and k are passed as the rule's unit vectors (neither kernel is declared with `qk_l2norm`: the
gated Oja kernels take it through **kwargs). fla's recurrent kernels for both rules have no backward
(GDN2's returns tensors outside autograd, gated Oja's raises NotImplementedError): declared
forward-only; the backward is judged through the chunked kernels (chunks of 64, fla's default).
fla's recurrent GDN2 reads g past its end where K is not a power of two
(repros/fla/gdn2_unmasked_gate_load.py): declared for powers of two (`head_dims`); it leaves the
final state of an empty packed sequence unwritten (repros/fla/gdn2_empty_sequence_final_state.py):
declared without packed batches. fla's chunked gated Oja backward returns NaN where the decay is
saturated (repros/fla/gated_oja_saturated_backward.py): it fails as shipped.
"""
import fla_real  # noqa: F401  (Triton's interpreter without a GPU)

from fla.ops.gated_oja_rule import chunk_gated_oja_rule as _chunk_gated_oja_rule
from fla.ops.gated_oja_rule import fused_recurrent_gated_oja_rule as _fused_recurrent_gated_oja_rule
from fla.ops.gdn2 import chunk_gdn2 as _chunk_gdn2
from fla.ops.gdn2 import fused_recurrent_gdn2 as _fused_recurrent_gdn2

from fla_deltanet import declared

COMMON = {"state_layout": "transposed", "scale": {"keyword": "scale", "value": "rsqrt_dk"},
          "output_final_state": "output_final_state", "outputs": {"y": "o", "M": "final_state"}, "accumulate": "f32",
          "varlen": "cu_seqlens"}
GDN2 = {**COMMON, "rules": ["gdn2"], "names": {"theta": "b", "eta": "w"}, "log_gates": {"alpha": "g"}}
GATED_OJA = {**COMMON, "rules": ["gated_oja"], "names": {"theta": "beta"}, "log_gates": {"alpha": "gv"}}

FLA_CHUNK = 64
# fla's recurrent GDN2 loads g as its recurrent KDA does, unmasked (next_power_of_2(K) channels):
# declared for powers of two (`head_dims`); `_all_dims` is the same kernel at every d. With packed
# batches it leaves an empty sequence's final state unwritten: declared without them (`varlen`);
# `_varlen` declares them
NO_VARLEN = {k: v for k, v in GDN2.items() if k != "varlen"}
fused_recurrent_gdn2 = declared(_fused_recurrent_gdn2, **NO_VARLEN, forward_only=True, head_dims="pow2")
fused_recurrent_gdn2_varlen = declared(_fused_recurrent_gdn2, **GDN2, forward_only=True, head_dims="pow2")
fused_recurrent_gdn2_all_dims = declared(_fused_recurrent_gdn2, **NO_VARLEN, forward_only=True)
chunk_gdn2 = declared(_chunk_gdn2, **GDN2, chunk_size=FLA_CHUNK)
fused_recurrent_gated_oja_rule = declared(_fused_recurrent_gated_oja_rule, **GATED_OJA, forward_only=True)
chunk_gated_oja_rule = declared(_chunk_gated_oja_rule, **GATED_OJA, chunk_size=FLA_CHUNK)
