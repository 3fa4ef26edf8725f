"""flash-linear-attention's own kernels (the `fla-core` package), declared with the same lines as
fla_deltanet.py and nothing else (docs/spec/py-backend.md#fla):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npm run conformance -- \
        --backend py:examples/py-kernels/fla_real.py:fused_recurrent_delta_rule --rule delta

On a machine without a GPU, Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1, set
here unless the environment sets it): slow, but the same kernel code. The fused recurrent kernels
run there; fla's chunked kernels (fla-core 0.5.2) do not: the interpreter fails inside them
(`AttributeError: 'int' object has no attribute 'to'`), so they are judged on a GPU.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ["TRITON_INTERPRET"] == "1":
    # Triton's autotuner times its configurations on a GPU driver, which the interpreter does not
    # have: keep each autotuned kernel's first configuration (the kernel code is unchanged).
    import triton.runtime.autotuner as _autotuner

    _autotuner_init = _autotuner.Autotuner.__init__

    def _first_config_only(self, *args, **kwargs):
        _autotuner_init(self, *args, **kwargs)
        self.configs = self.configs[:1]

    _autotuner.Autotuner.__init__ = _first_config_only

from fla.ops.delta_rule import fused_recurrent_delta_rule as _fused_recurrent_delta_rule  # noqa: E402
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as _fused_recurrent_gated_delta_rule  # noqa: E402

from fla_deltanet import DELTANET, GATED_DELTANET, declared  # noqa: E402

fused_recurrent_delta_rule = declared(_fused_recurrent_delta_rule, **DELTANET)
# fla's recurrent Gated DeltaNet has no backward (it raises NotImplementedError): forward-only.
fused_recurrent_gated_delta_rule = declared(_fused_recurrent_gated_delta_rule, **GATED_DELTANET, forward_only=True)
fused_recurrent_delta_rule_bf16 = declared(_fused_recurrent_delta_rule, **DELTANET, dtype="bf16")
fused_recurrent_gated_delta_rule_bf16 = declared(_fused_recurrent_gated_delta_rule, **GATED_DELTANET, dtype="bf16", forward_only=True)
# The same bf16 kernel declared as keeping intermediates in bf16 (fla normalises q and k in a
# separate kernel that writes them back in bf16): docs/spec/precision.md#intermediates
fused_recurrent_delta_rule_bf16_stored = declared(_fused_recurrent_delta_rule, **DELTANET, dtype="bf16", intermediates="storage")
