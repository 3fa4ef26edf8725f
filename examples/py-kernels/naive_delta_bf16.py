"""A bf16 delta-rule kernel in the usual reduced-precision conventions of linear-attention kernel
libraries, and its adaptor for `--backend py:` (docs/spec/py-backend.md#precision):

* inputs, gates and the output o in bf16 (what crosses the kernel's boundary);
* every product and sum computed in f32 inside, the state kept in f32 from step to step and
  returned in f32 (`state_dtype: "f32"`, the default);
* otherwise the layout and keywords of naive_delta.py (state [B, H, d_k, d_v], `scale`).

Autograd gives the gradients in the inputs' dtypes: bf16 for q, k, v and the gates, f32 for the
initial state.

Run:  node_modules/.bin/bun run conformance/cli.ts --backend py:examples/py-kernels/naive_delta_bf16.py:naive_delta_bf16 --filter py-
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from naive_delta import naive_delta  # noqa: E402


def _reduced(storage: torch.dtype):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        f32 = [t.float() for t in (q, k, v, forget, beta)]
        S0 = initial_state.float() if initial_state is not None else None
        o, S = naive_delta(*f32, scale=scale, initial_state=S0, output_final_state=output_final_state)
        return o.to(storage), S
    return kernel


naive_delta_bf16 = _reduced(torch.bfloat16)
naive_delta_bf16.nlc = {**naive_delta.nlc, "dtype": "bf16", "state_dtype": "f32"}

# The same kernel with f16 storage.
naive_delta_f16 = _reduced(torch.float16)
naive_delta_f16.nlc = {**naive_delta.nlc, "dtype": "f16", "state_dtype": "f32"}
