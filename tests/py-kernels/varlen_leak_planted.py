"""A delta-rule kernel that takes packed variable-length batches (`cu_seqlens`, B = 1, sequences
concatenated along T, one initial and one final state per sequence; docs/spec/py-backend.md#packed)
and planted variants in which one packed sequence's state leaks into the next:

* `packed`: correct (the control): every sequence starts from its own initial state;
* `leak`: sequence i + 1 starts from sequence i's final state instead of its own initial state (a
  kernel that runs the packed stream as one sequence);
* `leak_small`: sequence i + 1 starts from its own initial state plus 1/64 of sequence i's final
  state (a state buffer not fully reset between sequences);
* `no_keyword`: declares `varlen` but its forward takes no `cu_seqlens`: a load error naming it;
* `packed_read`: the frozen read (`delta.frozen`) on packed batches, each token reading its own
  sequence's state (correct).

The arithmetic is examples/py-kernels/naive_delta.py's, run on each sequence's slice.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta, naive_delta_read  # noqa: E402

LEAK_SMALL = 1 / 64


def _packed(plant):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None):
        if cu_seqlens is None:
            return naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state=output_final_state)
        cu = cu_seqlens.tolist()
        outs, finals = [], []
        for i, (a, b) in enumerate(zip(cu, cu[1:])):
            S0 = initial_state[i:i + 1]
            if i > 0 and plant == "leak":
                S0 = finals[-1]
            elif i > 0 and plant == "leak_small":
                S0 = S0 + LEAK_SMALL * finals[-1]
            o, S = naive_delta(q[:, a:b], k[:, a:b], v[:, a:b], forget[:, a:b], beta[:, a:b], scale, S0, output_final_state=True)
            outs.append(o)
            finals.append(S)
        return torch.cat(outs, 1), (torch.cat(finals, 0) if output_final_state else None)

    kernel.nlc = {**naive_delta.nlc, "varlen": "cu_seqlens"}
    return kernel


packed = _packed(None)
leak = _packed("leak")
leak_small = _packed("leak_small")


def no_keyword(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    return naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state)


no_keyword.nlc = {**naive_delta.nlc, "varlen": True}


def packed_read(q, initial_state, scale=None, cu_seqlens=None):
    if cu_seqlens is None:
        return naive_delta_read(q, initial_state, scale)
    cu = cu_seqlens.tolist()
    return torch.cat([naive_delta_read(q[:, a:b], initial_state[i:i + 1], scale) for i, (a, b) in enumerate(zip(cu, cu[1:]))], 1)


packed_read.nlc = {**naive_delta_read.nlc, "varlen": "cu_seqlens"}
