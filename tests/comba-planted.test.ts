/**
 * Comba's correction read with k instead of p (issue 34's planted bug) passes the C8 invariant
 * "Delta at p = k" by construction, so C9 is what catches it (docs/spec/titans-family.md#comba-tests):
 * in a temporary copy of the repository the PyTorch forward is planted to read the state with k,
 * and the C9 cross-check of `comba` fails while that of `delta` still passes; the unplanted copy
 * passes. Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { expectC9FailsPlant } from "./c9-plant.ts";
import { comba, equalsDeltaAtPEqualK } from "../src/rules/comba.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerPair } from "../src/rules/types.ts";

const torch = probeTorchSync();

/** The reference pair planted the same way: the correction reads M_t with k (its exact gradient: p's part joins dk, dp = 0). */
const readsK: InnerPair<string> = {
  saved: comba.inner.saved,
  forward: (inp, state, cfg) => comba.inner.forward({ ...inp, p: inp.k }, state, cfg),
  backward: (saved, inp, dy, cfg, dFinal) => {
    const g = comba.inner.backward(saved, { ...inp, p: inp.k }, dy, cfg, dFinal);
    const dk = new Tensor(g.dk!.dtype, g.dk!.shape, g.dk!.data.map((x, i) => x + g.dp!.data[i]!));
    return { ...g, dk, dp: new Tensor(g.dp!.dtype, g.dp!.shape) };
  },
};

describe("Comba: the correction read with k instead of p", () => {
  test("the Delta-at-p = k invariant cannot see it (it sets p = k)", () => {
    for (let seed = 1; seed <= 5; seed++) {
      expect({ seed, clean: equalsDeltaAtPEqualK(comba.inner, "f64", seed) }).toEqual({ seed, clean: null });
      expect({ seed, planted: equalsDeltaAtPEqualK(readsK, "f64", seed) }).toEqual({ seed, planted: null });
    }
  });

  test.skipIf(!torch.available)("C9 fails the planted PyTorch forward, and passes the clean one", () => {
    expectC9FailsPlant("comba", 'u = g["theta"][t] * (v[t] - S.t() @ p[t])', 'u = g["theta"][t] * (v[t] - S.t() @ k[t])');
  }, 300_000);
});
