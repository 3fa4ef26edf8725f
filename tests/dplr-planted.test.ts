/**
 * DPLR's low-rank read taken from the decayed state (u_t = M_t diag(w_t) a_t instead of M_t a_t;
 * issue 34's planted bug) passes three of DPLR's C8 invariants (write-read from M_0 = 0, IPLR at
 * α = 0, the column decay with a = 0: each has u unaffected by the decay) and fails the fourth,
 * "Gated Delta at a = −θ w k, b = k", on every seed; and C9 catches it
 * (docs/spec/titans-family.md#dplr-tests): in a temporary copy of the repository the PyTorch
 * forward is planted so, and the C9 cross-check of `dplr` fails while `delta` still passes; the
 * unplanted copy passes. The C9 part is skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { expectC9FailsPlant } from "./c9-plant.ts";
import { decayActsOnItsColumn, dplr, iplrInner, iplrIsDplrWithoutDecay, meetsGatedDelta, writeRead } from "../src/rules/dplr.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerPair } from "../src/rules/types.ts";

const torch = probeTorchSync();

/** The reference pair planted the same way: a_t replaced by diag(w_t) a_t in the read (forward only: the invariants read y and states). */
const decayedRead: InnerPair<string> = {
  saved: dplr.inner.saved,
  forward: (inp, state, cfg) => {
    const a = new Tensor(inp.a!.dtype, inp.a!.shape, inp.a!.data.map((x, i) => x * (1 - inp.alpha!.data[i]!)));
    return dplr.inner.forward({ ...inp, a }, state, cfg);
  },
  backward: (saved, inp, dy, cfg, dFinal) => dplr.inner.backward(saved, inp, dy, cfg, dFinal),
};

describe("DPLR: the low-rank read taken from the decayed state", () => {
  test("three invariants cannot see it, the Gated Delta one fails it on every seed", () => {
    for (const dtype of ["f64", "f32"] as const) {
      for (let seed = 1; seed <= 5; seed++) {
        expect({ seed, clean: [writeRead(dplr.inner, dtype, seed), iplrIsDplrWithoutDecay(dplr.inner, iplrInner, dtype, seed), decayActsOnItsColumn(dplr.inner, dtype, seed)] })
          .toEqual({ seed, clean: [null, null, null] });
        expect({ seed, planted: [writeRead(decayedRead, dtype, seed), iplrIsDplrWithoutDecay(decayedRead, iplrInner, dtype, seed), decayActsOnItsColumn(decayedRead, dtype, seed)] })
          .toEqual({ seed, planted: [null, null, null] });
        expect({ seed, clean: meetsGatedDelta(dplr.inner, dtype, seed) }).toEqual({ seed, clean: null });
        const msg = meetsGatedDelta(decayedRead, dtype, seed);
        expect({ seed, caught: typeof msg === "string" && msg.includes("Gated Delta") }).toEqual({ seed, caught: true });
      }
    }
  });

  test.skipIf(!torch.available)("C9 fails the planted PyTorch forward, and passes the clean one", () => {
    expectC9FailsPlant("dplr", "torch.outer(b[t], a[t] @ S)", "torch.outer(b[t], a[t] @ ((1 - g[\"alpha\"][t]).unsqueeze(1) * S))");
  }, 300_000);
});
