/**
 * The C8 invariants of the linear-attention family are able to fail
 * (docs/spec/linear-attention.md): GLA with its decays read from reversed channels is caught by
 * "a channel's decay acts on its key column" (and passes "Hebbian at equal channels", which cannot
 * see the channel order); RWKV-6 with its bonus read from reversed channels is caught by "a
 * channel's bonus acts on its key channel"; Hebbian with a 1% error in dk is caught by "linear
 * attention at alpha = 0". The clean pairs pass each, over 20 seeds in f64 and f32.
 */
import { describe, expect, test } from "bun:test";
import { gla } from "../src/rules/gla.ts";
import { hebbian, linearAttentionAtZeroDecay } from "../src/rules/hebbian.ts";
import { channelDecayActsOnItsColumn, equalsScalarRuleAtEqualChannels } from "../src/rules/kda.ts";
import { channelBonusActsOnItsChannel, rwkv6 } from "../src/rules/rwkv6.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerInputs, InnerPair, RuleDecl } from "../src/rules/types.ts";

/** A channel gate with its channels reversed, token by token. */
function reversed(g: Tensor): Tensor {
  const [s, d] = g.shape as [number, number];
  const out = new Tensor(g.dtype, [s, d]);
  for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) out.data[t * d + j] = g.data[t * d + d - 1 - j]!;
  return out;
}

/** The rule's pair with gate `gate` read from reversed channels (its gradient reversed back: a consistent bug). */
function reversedGate(decl: RuleDecl, gate: "alpha" | "theta"): InnerPair<string> {
  const dg = gate === "alpha" ? "dalpha" : "dtheta";
  const inner = decl.inner;
  const flip = (inp: InnerInputs) => ({ ...inp, [gate]: reversed(inp[gate]!) }) as InnerInputs;
  return {
    saved: inner.saved,
    forward: (inp, state, cfg) => inner.forward(flip(inp), state, cfg),
    backward: (saved, inp, dy, cfg, dFinal) => {
      const g = inner.backward(saved, flip(inp), dy, cfg, dFinal);
      return { ...g, [dg]: reversed(g[dg]!) };
    },
  };
}

describe("linear-attention family: planted bugs fail the invariant made for them", () => {
  for (const dtype of ["f64", "f32"] as const) {
    test(`${dtype}: GLA, decays on reversed channels`, () => {
      const planted = reversedGate(gla, "alpha");
      for (let seed = 1; seed <= 20; seed++) {
        expect({ seed, clean: channelDecayActsOnItsColumn(gla.inner, dtype, seed) }).toEqual({ seed, clean: null });
        const msg = channelDecayActsOnItsColumn(planted, dtype, seed);
        expect({ seed, caught: typeof msg === "string" && msg.startsWith("decay on channel") }).toEqual({ seed, caught: true });
        expect({ seed, blind: equalsScalarRuleAtEqualChannels(planted, hebbian.inner, "Hebbian", dtype, seed) }).toEqual({ seed, blind: null });
      }
    });

    test(`${dtype}: RWKV-6, bonus on reversed channels`, () => {
      const planted = reversedGate(rwkv6, "theta");
      for (let seed = 1; seed <= 20; seed++) {
        expect({ seed, clean: channelBonusActsOnItsChannel(rwkv6.inner, dtype, seed) }).toEqual({ seed, clean: null });
        // d = 6: the reversed channel of c is never c itself
        const msg = channelBonusActsOnItsChannel(planted, dtype, seed);
        expect({ seed, caught: typeof msg === "string" && msg.startsWith("bonus on channel") }).toEqual({ seed, caught: true });
      }
    });

    test(`${dtype}: Hebbian, dk off by 1%`, () => {
      const planted: InnerPair<string> = {
        saved: hebbian.inner.saved,
        forward: hebbian.inner.forward,
        backward: (saved, inp, dy, cfg, dFinal) => {
          const g = hebbian.inner.backward(saved, inp, dy, cfg, dFinal);
          const dk = new Tensor(g.dk!.dtype, [...g.dk!.shape]);
          for (let i = 0; i < dk.size; i++) dk.data[i] = 1.01 * g.dk!.data[i]!;
          return { ...g, dk };
        },
      };
      for (let seed = 1; seed <= 20; seed++) {
        expect({ seed, clean: linearAttentionAtZeroDecay(hebbian.inner, dtype, seed) }).toEqual({ seed, clean: null });
        const msg = linearAttentionAtZeroDecay(planted, dtype, seed);
        expect({ seed, caught: typeof msg === "string" && msg.startsWith("dk[") }).toEqual({ seed, caught: true });
      }
    });
  }
});
