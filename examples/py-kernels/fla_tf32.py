"""flash-linear-attention's f32 chunked kernels declared as they run on a GPU of compute capability 8
and up (docs/spec/precision.md#tf32): Triton's dots take the f32 operands in TF32 there, so the kernels
are TF32 kernels and declare `"accumulate": "tf32"`; declared f32 (fla_real.py, fla_new_rules.py) they
fail on such a GPU, rightly. On a CPU (Triton's interpreter) the dots are f32 and both declarations pass.

    npx nlc --backend py:examples/py-kernels/fla_tf32.py:chunk_kda_tf32
"""
from fla_new_rules import COMBA, DPLR, FLA_CHUNK, KDA, RWKV7, _chunk_comba, _chunk_dplr, _chunk_kda, _chunk_rwkv7
from fla_real import chunk_gated_delta_rule_tf32  # noqa: F401  (Gated DeltaNet's, declared beside its f32 one)
from fla_linear_attention import FLA_CHUNK as LA_CHUNK
from fla_linear_attention import GLA, LINEAR_ATTN, RWKV6, SIMPLE_GLA, _chunk_gla, _chunk_linear_attn, _chunk_rwkv6, _chunk_simple_gla

from fla_deltanet import declared

TF32 = {"accumulate": "tf32"}
chunk_kda_tf32 = declared(_chunk_kda, **{**KDA, **TF32}, chunk_size=FLA_CHUNK)
chunk_comba_tf32 = declared(_chunk_comba, **{**COMBA, **TF32}, chunk_size=FLA_CHUNK)
chunk_dplr_delta_rule_tf32 = declared(_chunk_dplr, **{**DPLR, **TF32}, chunk_size=FLA_CHUNK, constants={"chunk_size": FLA_CHUNK})
chunk_rwkv7_tf32 = declared(_chunk_rwkv7, **{**RWKV7, **TF32}, chunk_size=16)
# the linear-attention family's chunked kernels (fla_linear_attention.py)
chunk_simple_gla_tf32 = declared(_chunk_simple_gla, **{**SIMPLE_GLA, **TF32}, chunk_size=LA_CHUNK)
chunk_gla_tf32 = declared(_chunk_gla, **{**GLA, **TF32}, chunk_size=LA_CHUNK)
chunk_linear_attn_tf32 = declared(_chunk_linear_attn, **{**LINEAR_ATTN, **TF32}, chunk_size=LA_CHUNK, constants={"normalize": False})
chunk_rwkv6_tf32 = declared(_chunk_rwkv6, **{**RWKV6, **TF32}, chunk_size=LA_CHUNK)
