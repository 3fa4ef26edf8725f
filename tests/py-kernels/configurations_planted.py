"""Kernels with more than one configuration (docs/spec/py-backend.md#configurations), for
tests/configurations.test.ts:

* `declared`: the naive delta rule (examples/py-kernels/naive_delta.py), declaring three
  configurations that compute it alike ("fused", "two-pass", "split-k");
* `declared_planted`: the same, wrong in the configuration "two-pass" only: the step size
  beta x (1 + 1/128), as a miscompiled configuration would be;
* `triton_planted` (needs Triton): the naive delta rule whose output y passes through an autotuned
  Triton kernel of our own, `scaled_copy`, a plain copy in every configuration but BLOCK=32, which
  scales by 1 + 1/128. Forward-only: the Triton kernel has no backward.
"""
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402

CONFIGURATIONS = ["fused", "two-pass", "split-k"]


def _declared(wrong):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False, configuration="fused"):
        if configuration not in CONFIGURATIONS:
            raise ValueError(f"no configuration {configuration!r}")
        if configuration == wrong:
            beta = beta * (1 + 1 / 128)
        return naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state)

    kernel.nlc = {**naive_delta.nlc, "configurations": CONFIGURATIONS}
    return kernel


declared = _declared(None)
declared_planted = _declared("two-pass")

if importlib.util.find_spec("triton") is not None:  # the Triton kernel below needs Triton; CI's Python has none
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64) for w in (2, 4)], key=["n"])
    @triton.jit
    def scaled_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        if BLOCK == 32:
            x = x * (1 + 1 / 128)
        tl.store(y_ptr + offs, x, mask=m)

    def triton_planted(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        o, S = naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state)
        x = o.contiguous()
        y = torch.empty_like(x)
        scaled_copy[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
        return y, S

    triton_planted.nlc = {**naive_delta.nlc, "forward_only": True}
