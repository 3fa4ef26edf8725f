"""A correct f32 delta-rule kernel that allocates without naming a dtype, as much kernel code does
(its output torch.zeros(...), a constant torch.tensor(0.5)): in a user's program those are float32,
torch's default. The kernel host must run it so (docs/spec/py-backend.md#default-dtype): under another
default its output would be float64, which an f32 kernel does not return.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402

HALF = torch.tensor(0.5)  # module level: made when the kernel's module is imported


def default_dtype_delta(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    if scale is None:
        scale = dk ** -0.5
    S = initial_state if initial_state is not None else torch.zeros(B, H, dk, dv)
    o = torch.zeros(B, T, H, dv)  # the output allocated without a dtype, then written token by token
    for t in range(T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t] * scale
        a, b = forget[:, t, :, None, None], beta[:, t, :, None, None]
        err = torch.matmul(kt.unsqueeze(-2), S).squeeze(-2) - vt
        S = (1 - a) * S - (b * HALF * 2) * (kt.unsqueeze(-1) * err.unsqueeze(-2))
        o[:, t] = torch.matmul(qt.unsqueeze(-2), S).squeeze(-2)
    return o, (S if output_final_state else None)


default_dtype_delta.nlc = dict(naive_delta.nlc)
