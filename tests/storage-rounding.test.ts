/**
 * The storage emulation's stochastic rounding (python/nlc_torch/storage.py, docs/spec/precision.md#intermediates)
 * runs on numpy for speed; `round_to_torch` is the same rounding in torch ops. The two must agree
 * bit for bit — on normal, subnormal, tiny, huge, infinite and NaN values, f32 and f64 inputs, bf16
 * and f16, empty tensors — and use the same numbers (drawn a block at a time on the fast path), so
 * every yardstick built on it is unchanged. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { defaultPython, pythonEnv } from "../oracle/torch-process.ts";

const hasTorch = probeTorchSync().available;

const SCRIPT = `
import torch
from nlc_torch.storage import Draws, round_to, round_to_torch, np
assert np is not None, "numpy is missing: the fast path is not under test"
g = torch.Generator(); g.manual_seed(5)
cases = []
for dt in (torch.float32, torch.float64):
    for scale in (1e-30, 1e-8, 1e-6, 1e-3, 1.0, 1e3, 6e4, 1e38):
        cases.append((torch.randn(7, 5, generator=g, dtype=torch.float64) * scale).to(dt))
    tiny = 2.0 ** -149 if dt == torch.float32 else 2.0 ** -1074
    small = 2.0 ** -140 if dt == torch.float32 else 2.0 ** -1000
    edge = [0.0, -0.0, 1.0, -1.0, -small, small, -3 * 2**-134, 2**-126, -2**-126 * (1 - 2**-20), 2**-24, 2**-25, 3 * 2**-26, -tiny, tiny, 2**-130, 65504.0, 65519.9, 65520.0, 65536.0, -65519.0,
            3.3895313892515355e+38, 3.39e38, -3.4e38, float("inf"), float("-inf"), float("nan"), 1 + 2**-9, 1 - 2**-12, 2**-14, 2**-14 * (1 + 2**-11)]
    # each value alone too: one infinite or NaN element must not decide how the others are taken
    cases += [torch.tensor(edge, dtype=dt)] + [torch.tensor([v, 1.5], dtype=dt) for v in edge] + [torch.tensor(2.5, dtype=dt), torch.zeros(0, 3, dtype=dt), torch.randn(4, 6, dtype=dt).t()]
n = 0
for dtype in ("bf16", "f16"):
    for seed in range(10):
        ga, gb = torch.Generator(), torch.Generator()
        ga.manual_seed(seed); gb.manual_seed(seed)
        draws = Draws(ga)
        draws.BLOCK = 64  # blocks run out mid-sequence here, as they do in a long run
        for x in cases:
            a, b = round_to(x, dtype, draws), round_to_torch(x, dtype, gb)
            assert a.dtype == b.dtype == x.dtype and a.shape == b.shape, (x, a, b)
            bits = torch.int32 if x.dtype == torch.float32 else torch.int64
            same = (a.contiguous().view(bits) == b.contiguous().view(bits)) | (torch.isnan(a) & torch.isnan(b))
            assert bool(same.all()), (dtype, seed, x, a, b)
            n += x.numel()
        assert float(draws.take(1)[0]) == float(torch.rand(1, generator=gb, dtype=torch.float64)[0]), "the two used different numbers"
print("same bits", n)
`;

test.skipIf(!hasTorch)("the numpy stochastic rounding of stored values is the torch one, bit for bit, using the same numbers", () => {
  const p = Bun.spawnSync({ cmd: [defaultPython({}), "-c", SCRIPT], env: pythonEnv(), stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.stdout.toString()).toMatch(/^same bits \d{4,}/);
}, 60_000);
