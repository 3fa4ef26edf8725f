"""fla's `chunk_ttt_linear_ref` multiplies its caller's q by the scale, in place, when q is f32.

Claim (docs/spec/py-backend.md#fla-ttt): `chunk_ttt_linear_ref` (fla-core 0.5.2, fla/ops/ttt/naive.py)
transposes q (a view), converts it with `.to(torch.float32)` (the same tensor when q is already
f32) and passes it to `ttt_linear`, which runs `q *= scale`: the caller's q is scaled in place.
A bf16 q is converted to a new tensor and left alone.

What this script does, with torch and fla only: it calls `chunk_ttt_linear_ref` on f32 and on bf16
inputs (B = 1, T = 4, H = 1, K = V = 4, mini-batch 1, scale 0.5) and compares q after the call
with a copy taken before it.

Run: /path/to/venv/bin/python repros/fla/ttt_ref_scales_q_in_place.py. Exit 0 when the finding shows.
"""
import torch
from fla.ops.ttt.naive import chunk_ttt_linear_ref

torch.manual_seed(0)
B, T, H, D = 1, 4, 1, 4
changed = {}
for dt in (torch.float32, torch.bfloat16):
    q, k, v = (torch.randn(B, T, H, D).to(dt) for _ in range(3))
    w, b = torch.ones(H, D), torch.zeros(H, D)
    eta = torch.full((B, T, H, 1), 0.1).to(dt)
    before = q.clone()
    chunk_ttt_linear_ref(q, k, v, w, b, eta, scale=0.5, mini_batch_size=1)
    ratio = (q.float() / before.float()).unique()
    changed[dt] = not torch.equal(q, before)
    print(f"q {dt}: changed by the call: {changed[dt]}; q after / q before: {[round(x, 4) for x in ratio.tolist()]}")
shown = changed[torch.float32] and not changed[torch.bfloat16]
print(("SHOWN" if shown else "NOT SHOWN") + ": chunk_ttt_linear_ref scales an f32 q in place (by the scale, 0.5); a bf16 q is left alone")
raise SystemExit(0 if shown else 1)
