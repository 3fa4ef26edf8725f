"""flash-linear-attention's own kernels (the `fla-core` package), declared with the same lines as
fla_deltanet.py and nothing else (docs/spec/py-backend.md#fla):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npm run conformance -- \
        --backend py:examples/py-kernels/fla_real.py:fused_recurrent_delta_rule --rule delta

On a machine without a GPU, Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1, set
here when torch sees no GPU, unless the environment sets it): slow, but the same kernel code. The
kernel host adds what the interpreter lacks for these kernels (python/nlc_torch/triton_cpu.py:
bf16 arithmetic on values, not bit patterns; loop variables as tensors), so fla's chunked kernels
run there too (docs/spec/py-backend.md#triton-cpu).

Every autotune configuration of every Triton kernel a call reaches is judged, one at a time, by
the kernel host (python/nlc_torch/configurations.py; NLC_KERNEL_CONFIGS=first judges only each
kernel's first, and the report says so): the adaptor declares nothing for it
(docs/spec/py-backend.md#configurations).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fla.ops.delta_rule import chunk_delta_rule as _chunk_delta_rule  # noqa: E402
from fla.ops.delta_rule import fused_recurrent_delta_rule as _fused_recurrent_delta_rule  # noqa: E402
from fla.ops.gated_delta_rule import chunk_gated_delta_rule as _chunk_gated_delta_rule  # noqa: E402
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as _fused_recurrent_gated_delta_rule  # noqa: E402

from fla_deltanet import DELTANET, GATED_DELTANET  # noqa: E402
from nlc_torch import declared  # noqa: E402

fused_recurrent_delta_rule = declared(_fused_recurrent_delta_rule, **DELTANET)
# fla's recurrent Gated DeltaNet has no backward (it raises NotImplementedError): forward-only.
fused_recurrent_gated_delta_rule = declared(_fused_recurrent_gated_delta_rule, **GATED_DELTANET, forward_only=True)
fused_recurrent_delta_rule_bf16 = declared(_fused_recurrent_delta_rule, **DELTANET, dtype="bf16")
fused_recurrent_gated_delta_rule_bf16 = declared(_fused_recurrent_gated_delta_rule, **GATED_DELTANET, dtype="bf16", forward_only=True)
# The same bf16 kernel declared as keeping intermediates in bf16 (fla normalises q and k in a
# separate kernel that writes them back in bf16): docs/spec/precision.md#intermediates
fused_recurrent_delta_rule_bf16_stored = declared(_fused_recurrent_delta_rule, **DELTANET, dtype="bf16", intermediates="storage")

# fla's chunked kernels (chunks of 64 tokens, the WY representation). fla's
# chunked DeltaNet refuses f32 inputs ("does not support float32"), so it is declared in bf16 only.
# On a GPU of compute capability 8 or more, fla's f32 chunked Gated DeltaNet multiplies in TF32
# (its triangular solve asks for it, and Triton's dots default to it): declared f32 it fails the
# f32 bound, which is the verdict (docs/spec/py-backend.md#fla).
FLA_CHUNK = 64
chunk_gated_delta_rule = declared(_chunk_gated_delta_rule, **GATED_DELTANET, chunk_size=FLA_CHUNK)
# the same kernel declared as it runs on such a GPU: f32 tensors, TF32 products (docs/spec/precision.md#tf32)
chunk_gated_delta_rule_tf32 = declared(_chunk_gated_delta_rule, **{**GATED_DELTANET, "accumulate": "tf32"}, chunk_size=FLA_CHUNK)
chunk_delta_rule_bf16 = declared(_chunk_delta_rule, **DELTANET, dtype="bf16", chunk_size=FLA_CHUNK)
chunk_gated_delta_rule_bf16 = declared(_chunk_gated_delta_rule, **GATED_DELTANET, dtype="bf16", chunk_size=FLA_CHUNK)
chunk_delta_rule_bf16_stored = declared(_chunk_delta_rule, **DELTANET, dtype="bf16", chunk_size=FLA_CHUNK, intermediates="storage")
chunk_gated_delta_rule_bf16_stored = declared(_chunk_gated_delta_rule, **GATED_DELTANET, dtype="bf16", chunk_size=FLA_CHUNK,
                                              intermediates="storage")
