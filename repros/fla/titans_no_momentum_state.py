"""fla's Titans-linear ops take no initial momentum and return none: a sequence split in two calls
is not the sequence in one call unless the momentum gate is zero.

Claim (docs/spec/py-backend.md#fla-ttt): `titans_linear` and `chunk_titans_linear` (fla-core 0.5.2,
fla/ops/titans/naive.py) take `initial_state` (the memory M) only, start the momentum S from zero,
and return (o, M). The rule titans_linear's state is (M, S, γ, β) (docs/spec/ttt.md#titans-linear).

What this script does, with torch and fla only: T = 6 tokens in one call, then the same tokens as
3 + 3, the second call starting from the M the first returned; it prints the largest difference of
the outputs of the last 3 tokens and of the final M, with the momentum gate η drawn in (0.1, 0.9)
and, as the control, η = 0 (no momentum: the split must not matter).

Run: /path/to/venv/bin/python repros/fla/titans_no_momentum_state.py. Exit 0 when the finding shows.
"""
import inspect

import torch
from fla.ops.titans.naive import chunk_titans_linear, titans_linear

torch.manual_seed(0)
B, H, T, D, eps = 1, 1, 6, 4, 1e-6
dt = torch.float64
q, k, v = (torch.nn.functional.normalize(torch.randn(B, H, T, D, dtype=dt), dim=-1) for _ in range(3))
w, b = torch.rand(H, D, dtype=dt) + 0.5, torch.randn(H, D, dtype=dt) * 0.3
theta = torch.rand(B, H, T, 1, dtype=dt) * 0.2 + 0.05
alpha = torch.rand(B, H, T, 1, dtype=dt) * 0.2 + 0.05
M0 = torch.randn(B, H, D, D, dtype=dt) * 0.3


def run(fn, eta, lo, hi, M):
    s = slice(lo, hi)
    return fn(q[:, :, s].clone(), k[:, :, s].clone(), v[:, :, s].clone(), w, b, theta[:, :, s], alpha[:, :, s], eta[:, :, s], eps, 1,
              M.clone(), True)


shown = True
for fn in (titans_linear, chunk_titans_linear):
    print(f"{fn.__name__}{inspect.signature(fn)}")
    for name, eta in (("eta in (0.1, 0.9)", torch.rand(B, H, T, 1, dtype=dt) * 0.8 + 0.1), ("eta = 0", torch.zeros(B, H, T, 1, dtype=dt))):
        o, MT = run(fn, eta, 0, T, M0)
        _, Mh = run(fn, eta, 0, T // 2, M0)
        o2, MT2 = run(fn, eta, T // 2, T, Mh)
        dy, dM = (o[:, :, T // 2:] - o2).abs().max().item(), (MT - MT2).abs().max().item()
        print(f"  {name}: one call vs split at t = {T // 2}: max |o diff| {dy:.3e}, max |M_T diff| {dM:.3e}")
        shown &= (dy > 1e-6 and dM > 1e-6) if name.startswith("eta in") else (dy < 1e-12 and dM < 1e-12)
print(("SHOWN" if shown else "NOT SHOWN") + ": with momentum the split call differs (S restarts at 0, and is neither taken nor"
      " returned); with eta = 0 it agrees")
raise SystemExit(0 if shown else 1)
