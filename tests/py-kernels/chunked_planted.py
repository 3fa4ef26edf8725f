"""A chunked delta-rule kernel (examples/py-kernels/naive_delta.py run chunk by chunk, chunks of 16
tokens, the state handed from chunk to chunk) and planted variants whose bugs only show at scale
(tests/regime-planted.test.ts; docs/spec/conformance.md#regime):

* `chunked`: correct (the control);
* `handoff`: the state handed to the next chunk scaled by 1 + 1/128;
* `tile`: y ignores the second 64-wide tile of the head dimension when d > 64;
* `stride`: with H > 8 heads, the gates are read with a head stride of 8 (head h reads head h mod 8's);
* `partial`: the last partial chunk dropped (T > 16 not a multiple of 16: no state update, y = 0).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402

CHUNK = 16
TILE = 64


def _chunked(plant):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        B, T, H, dk = k.shape
        scale = dk ** -0.5 if scale is None else scale
        S = initial_state if initial_state is not None else q.new_zeros(B, H, dk, v.shape[-1])
        if plant == "stride" and H > 8:
            idx = torch.arange(H) % 8
            forget, beta = forget[:, :, idx], beta[:, :, idx]
        run = T
        if plant == "partial" and T > CHUNK and T % CHUNK != 0:
            run = (T // CHUNK) * CHUNK
        outs = []
        for c0 in range(0, T, CHUNK):
            for t in range(c0, min(c0 + CHUNK, T)):
                if t >= run:
                    outs.append(q.new_zeros(B, H, v.shape[-1]))
                    continue
                kt, vt, qt = k[:, t], v[:, t], q[:, t] * scale
                a, b = forget[:, t, :, None, None], beta[:, t, :, None, None]
                err = torch.einsum("bhk,bhkv->bhv", kt, S) - vt
                S = (1 - a) * S - b * torch.einsum("bhk,bhv->bhkv", kt, err)
                if plant == "tile" and dk > TILE:
                    outs.append(torch.einsum("bhk,bhkv->bhv", qt[..., :TILE], S[:, :, :TILE]))
                else:
                    outs.append(torch.einsum("bhk,bhkv->bhv", qt, S))
            if plant == "handoff" and c0 + CHUNK < T:
                S = S * (1 + 1 / 128)
        return torch.stack(outs, dim=1), (S if output_final_state else None)

    kernel.nlc = {**naive_delta.nlc, "chunk_size": CHUNK}
    return kernel


chunked = _chunked(None)
handoff = _chunked("handoff")
tile = _chunked("tile")
stride = _chunked("stride")
partial = _chunked("partial")
