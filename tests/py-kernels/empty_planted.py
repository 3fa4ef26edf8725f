"""Planted kernels for the empty-sequence case (docs/spec/py-backend.md#edges; tests/empty-py-planted.test.ts):
DeltaNet in packed variable-length batches (`cu_seqlens`, one initial and one final state per
sequence), each right on every sequence that has tokens and wrong only where cu_seqlens holds two
equal offsets (an empty sequence):

* `skips_empty`: drops the empty sequences before it runs, so the initial states are read in the
  order of the sequences that have tokens: a sequence after an empty one starts from the wrong
  sequence's initial state, and the final states land on the wrong sequences;
* `empty_final_from_previous`: carries one state buffer from sequence to sequence and, for an empty
  sequence, writes that buffer (the previous sequence's final state, zero before the first) as its
  final state instead of the empty sequence's own initial state;
* `final_unwritten`: allocates the final states with `new_empty` and returns early for an empty
  sequence before storing its final state (as flash-linear-attention's fused_recurrent_kda did):
  an empty sequence's final state is whatever the allocator handed out;
* `hand_off`: the same driver without a plant (the contrast).

The arithmetic per sequence is fla_style_ops.py's chunked DeltaNet; the plants are in the driver
around it, which does its own packing (it does not go through fla_style_ops._run).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
import fla_style_ops as ops  # noqa: E402
from fla_deltanet import DELTANET  # noqa: E402
from nlc_torch import declared  # noqa: E402


def _driver(plant):
    def kernel(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
               use_qk_l2norm_in_kernel=False):
        if cu_seqlens is None:
            return ops.chunk_delta_rule(q, k, v, beta, scale, initial_state, output_final_state, None, use_qk_l2norm_in_kernel)
        if q.shape[0] != 1:
            raise ValueError(f"cu_seqlens needs B = 1, got B = {q.shape[0]}")
        cu = cu_seqlens.tolist()
        segs = list(zip(cu, cu[1:]))
        keep = [i for i, (a, b) in enumerate(segs) if b > a or plant != "skips_empty"]
        outs, finals = [], []
        carried = torch.zeros_like(initial_state[:1])
        # the plant "final_unwritten": one buffer for the final states, stored sequence by sequence
        final = initial_state.new_empty(initial_state.shape) if plant == "final_unwritten" else None
        for j, i in enumerate(keep):
            a, b = segs[i]
            # the plant "skips_empty": the j-th sequence with tokens reads the j-th initial state
            S0 = initial_state[j:j + 1] if plant == "skips_empty" else initial_state[i:i + 1]
            if a == b and final is not None:
                continue  # returns before it stores this sequence's final state
            if a == b:
                # the plant "empty_final_from_previous": the carried buffer, not this sequence's initial state
                finals.append(carried if plant == "empty_final_from_previous" else S0)
                continue
            o, S = ops.chunk_delta_rule(q[:, a:b], k[:, a:b], v[:, a:b], beta[:, a:b], scale, S0, True, None, use_qk_l2norm_in_kernel)
            outs.append(o)
            finals.append(S)
            carried = S
            if final is not None:
                final[i:i + 1] = S
        if final is not None:
            return torch.cat(outs, 1), (final if output_final_state else None)
        if plant == "skips_empty":  # every sequence still gets a final state: the dropped ones at the end, zero
            finals += [torch.zeros_like(initial_state[:1])] * (len(segs) - len(keep))
        return torch.cat(outs, 1), (torch.cat(finals, 0) if output_final_state else None)

    return declared(kernel, **DELTANET, chunk_size=ops.CHUNK)


skips_empty = _driver("skips_empty")
empty_final_from_previous = _driver("empty_final_from_previous")
final_unwritten = _driver("final_unwritten")
hand_off = _driver(None)
