"""flash-linear-attention's linear-attention kernels (fla-core 0.5.2), each declared and nothing else
(docs/spec/py-backend.md#fla-linear-attention; the name map: docs/spec/linear-attention.md#simple-gla):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npx nlc --backend py:examples/py-kernels/fla_linear_attention.py:fused_recurrent_gla

* simple GLA (`simple_gla`) is `hebbian`: g [B, T, H] is the log of 1 − α, one decay per token and head.
* GLA (`gla`) is `gla`: a decay per key channel in log space, g [B, T, H, K] (the recurrent kernel's
  keyword is gk; its value-side decay gv is left at None: `gla` has none).
* linear attention (`linear_attn`) is `hebbian` without a decay (α declared absent: generated at 0,
  not sent). fla's chunked linear attention normalises its output by default (`normalize=True`,
  a division by the running sum of q·k: another function); it is declared with the plain form,
  `normalize=False` passed as a constant, as the recurrent one's default is.
* simple GLA with one decay per head (`g_gamma [H]`, the path fla's RetNet and Lightning attention
  call) is `hebbian` with α declared `per_head` (docs/spec/py-backend.md#per-head).
* RWKV-6 (`rwkv6`) is `rwkv6`: r is q, w the per-channel log decay, the bonus u [H, K] one per head
  (`per_head`; its gradient is not compared).

Not declared: RetNet (`retention`) and Lightning attention (`lightning_attn`) as entry points; they
compute a decay per head from the head index (and the layer) and call simple GLA with it as
`g_gamma`, judged above.

Every kernel here has a backward (autograd over fla's Triton backward), judged. On a machine without a
GPU the Triton kernels run in Triton's interpreter (fla_real.py sets it up).
"""
import fla_real  # noqa: F401  (Triton's interpreter without a GPU)

from fla.ops.gla import chunk_gla as _chunk_gla
from fla.ops.gla import fused_recurrent_gla as _fused_recurrent_gla
from fla.ops.linear_attn import chunk_linear_attn as _chunk_linear_attn
from fla.ops.rwkv6 import chunk_rwkv6 as _chunk_rwkv6
from fla.ops.rwkv6 import fused_recurrent_rwkv6 as _fused_recurrent_rwkv6
from fla.ops.linear_attn import fused_recurrent_linear_attn as _fused_recurrent_linear_attn
from fla.ops.simple_gla import chunk_simple_gla as _chunk_simple_gla
from fla.ops.simple_gla import fused_recurrent_simple_gla as _fused_recurrent_simple_gla

from nlc_torch import declared

COMMON = {"state_layout": "transposed", "scale": {"keyword": "scale", "value": "rsqrt_dk"},
          "output_final_state": "output_final_state", "outputs": {"y": "o", "M": "final_state"}, "accumulate": "f32",
          "varlen": "cu_seqlens"}
SIMPLE_GLA = {**COMMON, "rules": ["hebbian"], "log_gates": {"alpha": "g"}}
GLA = {**COMMON, "rules": ["gla"], "log_gates": {"alpha": "g"}}
LINEAR_ATTN = {**COMMON, "rules": ["hebbian"], "absent": ["alpha"]}

# fla's chunked kernels use chunks of 64 tokens (chunk_gla picks min(64, max(16, next_power_of_2(T))):
# 64 from T = 33 on, so the declared case T = 65 crosses one boundary in each)
FLA_CHUNK = 64

fused_recurrent_simple_gla = declared(_fused_recurrent_simple_gla, **SIMPLE_GLA)
chunk_simple_gla = declared(_chunk_simple_gla, **SIMPLE_GLA, chunk_size=FLA_CHUNK)
fused_recurrent_gla = declared(_fused_recurrent_gla, **{**GLA, "log_gates": {"alpha": "gk"}})
chunk_gla = declared(_chunk_gla, **GLA, chunk_size=FLA_CHUNK)
fused_recurrent_linear_attn = declared(_fused_recurrent_linear_attn, **LINEAR_ATTN, constants={"normalize": False})
chunk_linear_attn = declared(_chunk_linear_attn, **LINEAR_ATTN, chunk_size=FLA_CHUNK, constants={"normalize": False})

# simple GLA with one decay per head (`g_gamma [H]`, in log space, g not passed): the path fla's RetNet
# and Lightning attention take, with decays fla computes from the head index (and the layer)
SIMPLE_GLA_GAMMA = {**SIMPLE_GLA, "log_gates": {"alpha": "g_gamma"}, "per_head": ["alpha"]}
fused_recurrent_simple_gla_gamma = declared(_fused_recurrent_simple_gla, **SIMPLE_GLA_GAMMA)
chunk_simple_gla_gamma = declared(_chunk_simple_gla, **SIMPLE_GLA_GAMMA, chunk_size=FLA_CHUNK)

# RWKV-6: receptance r is q, w the per-channel log decay, u [H, K] the bonus: one per head (`per_head`)
RWKV6 = {**COMMON, "rules": ["rwkv6"], "names": {"q": "r", "theta": "u"}, "log_gates": {"alpha": "w"}, "per_head": ["theta"]}
fused_recurrent_rwkv6 = declared(_fused_recurrent_rwkv6, **RWKV6)
chunk_rwkv6 = declared(_chunk_rwkv6, **RWKV6, chunk_size=FLA_CHUNK)
