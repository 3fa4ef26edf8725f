/**
 * KDA's channel invariants are able to fail (docs/spec/titans-family.md#kda-tests): a reference
 * pair planted to apply the per-channel decays to reversed channels (the bug issue 34 found
 * invisible when KDA is judged as Gated Delta with its gate broadcast) is caught by "a channel's
 * decay acts on its key column", and passes "Gated Delta at equal channels", which cannot see the
 * channel order; the clean pair passes both.
 */
import { describe, expect, test } from "bun:test";
import { channelDecayActsOnItsColumn, equalsScalarRuleAtEqualChannels, kda } from "../src/rules/kda.ts";
import { gated_delta } from "../src/rules/gated_delta.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerInputs, InnerPair } from "../src/rules/types.ts";

/** α with its channels reversed, token by token. */
function reversed(alpha: Tensor): Tensor {
  const [s, d] = alpha.shape as [number, number];
  const out = new Tensor(alpha.dtype, [s, d]);
  for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) out.data[t * d + j] = alpha.data[t * d + d - 1 - j]!;
  return out;
}

/** The reference pair with the decays read from reversed channels (dα reversed back: a consistent bug). */
const planted: InnerPair<string> = {
  saved: kda.inner.saved,
  forward: (inp, state, cfg) => kda.inner.forward({ ...inp, alpha: reversed(inp.alpha!) } as InnerInputs, state, cfg),
  backward: (saved, inp, dy, cfg, dFinal) => {
    const g = kda.inner.backward(saved, { ...inp, alpha: reversed(inp.alpha!) } as InnerInputs, dy, cfg, dFinal);
    return { ...g, dalpha: reversed(g.dalpha!) };
  },
};

describe("KDA: decays on reversed channels", () => {
  for (const dtype of ["f64", "f32"] as const) {
    test(`${dtype}: the column invariant fails it on every seed; the equal-channel invariant cannot see it`, () => {
      for (let seed = 1; seed <= 20; seed++) {
        expect({ seed, clean: channelDecayActsOnItsColumn(kda.inner, dtype, seed) }).toEqual({ seed, clean: null });
        expect({ seed, clean: equalsScalarRuleAtEqualChannels(kda.inner, gated_delta.inner, "Gated Delta", dtype, seed) }).toEqual({ seed, clean: null });
        const msg = channelDecayActsOnItsColumn(planted, dtype, seed);
        // with d = 6 the reversed channel of c is never c itself
        expect({ seed, caught: typeof msg === "string" && msg.startsWith("decay on channel") }).toEqual({ seed, caught: true });
        expect({ seed, planted: equalsScalarRuleAtEqualChannels(planted, gated_delta.inner, "Gated Delta", dtype, seed) }).toEqual({ seed, planted: null });
      }
    });
  }
});
