"""flash-linear-attention's own kernels (the `fla-core` package), declared with the same lines as
fla_deltanet.py and nothing else (docs/spec/py-backend.md#fla):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npm run conformance -- \
        --backend py:examples/py-kernels/fla_real.py:fused_recurrent_delta_rule --rule delta

On a machine without a GPU, Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1, set
here when torch sees no GPU, unless the environment sets it): slow, but the same kernel code. The
fused recurrent kernels run there; fla's chunked kernels (fla-core 0.5.2) do not: the interpreter
fails inside them (`AttributeError: 'int' object has no attribute 'to'`), so they are judged on a
GPU (the `chunk_*` callables below).

Triton's autotuner tries every configuration of a kernel for every new shape, and each try is a
compilation; the cases of a conformance run have many shapes. Where the kernels are interpreted, or
where NLC_FLA_FIRST_CONFIG=1, each autotuned kernel keeps its first configuration (the kernel code
is unchanged; any configuration fla ships is a kernel to judge).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("NLC_FLA_FIRST_CONFIG") == "1":
    import triton.runtime.autotuner as _autotuner

    _autotuner_init = _autotuner.Autotuner.__init__

    def _first_config_only(self, *args, **kwargs):
        _autotuner_init(self, *args, **kwargs)
        self.configs = self.configs[:1]

    _autotuner.Autotuner.__init__ = _first_config_only

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

# fla's chunked kernels (chunks of 64 tokens, the WY representation; GPU only, see above). fla's
# chunked DeltaNet refuses f32 inputs ("does not support float32"), so it is declared in bf16 only.
# On a GPU of compute capability 8 or more, fla's f32 chunked Gated DeltaNet multiplies in TF32
# (its triangular solve asks for it, and Triton's dots default to it): declared f32 it fails the
# f32 bound, which is the verdict (docs/spec/py-backend.md#fla).
FLA_CHUNK = 64
chunk_gated_delta_rule = declared(_chunk_gated_delta_rule, **GATED_DELTANET, chunk_size=FLA_CHUNK)
chunk_delta_rule_bf16 = declared(_chunk_delta_rule, **DELTANET, dtype="bf16", chunk_size=FLA_CHUNK)
chunk_gated_delta_rule_bf16 = declared(_chunk_gated_delta_rule, **GATED_DELTANET, dtype="bf16", chunk_size=FLA_CHUNK)
chunk_delta_rule_bf16_stored = declared(_chunk_delta_rule, **DELTANET, dtype="bf16", chunk_size=FLA_CHUNK, intermediates="storage")
chunk_gated_delta_rule_bf16_stored = declared(_chunk_gated_delta_rule, **GATED_DELTANET, dtype="bf16", chunk_size=FLA_CHUNK,
                                              intermediates="storage")
