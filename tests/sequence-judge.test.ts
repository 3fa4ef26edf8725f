/**
 * The judge one sequence at a time (oracle/sequence-judge.ts, docs/spec/precision.md#streaming)
 * gives flashCompare's verdict (oracle/kernel-judge.ts) from per-sequence summaries: on correct
 * cases, on a planted 3% scale of one tensor at bf16 storage (the bias test), a planted spike (the bound) and a
 * non-finite value — and the per-rule yardstick runs (docs/spec/precision.md#orders-matrix).
 */
import { expect, test } from "bun:test";
import { flashCompare, type Compared } from "../oracle/kernel-judge.ts";
import { plainOrders, plainRuns, RANDOM_RUNS } from "../oracle/plain-reference.ts";
import { streamVerdict, summarise } from "../oracle/sequence-judge.ts";
import type { Precision } from "../src/precision.ts";
import { RULES, ruleByKey } from "../src/rules/index.ts";
import { Rng } from "../src/rng.ts";

const P: Precision = { storage: "f32", state: "f32", accumulate: "f32" };
/** A scale error the bound lets through and the bias test catches needs a plain term past the f32 ill-conditioning threshold: bf16 storage. */
const BF16: Precision = { storage: "bf16", state: "f32", accumulate: "f32" };

function items(rng: Rng, plant: "none" | "scale" | "spike" | "nan"): Compared[] {
  const out: Compared[] = [];
  for (let seq = 0; seq < 3; seq++) {
    for (const [name, group, n] of [["y", "out", 200], ["dk", "grad", 200], ["dalpha", "grad", 20]] as const) {
      const ref64 = Float64Array.from({ length: n }, () => rng.uniform(-1, 1));
      const ref32 = ref64.map((r) => r + 1e-6 * rng.uniform(-1, 1));
      const kernel = ref64.map((r) => r + 1e-6 * rng.uniform(-1, 1));
      // a 3% scale inside the bound (one large plain-reference error widens it: at bf16 storage,
      // below the ill-conditioning threshold of 5e-2 of the scale) but not past the bias test
      if (name === "dk" && plant === "scale") {
        ref32[0] = ref64[0]! + 0.03;
        for (let i = 0; i < n; i++) kernel[i] = ref64[i]! * 1.03;
      }
      if (name === "y" && seq === 1 && plant === "spike") kernel[7] = ref64[7]! + 0.01;
      if (name === "dalpha" && seq === 2 && plant === "nan") kernel[3] = NaN;
      out.push({ name, group, seq, kernel, ref64, ref32 });
    }
  }
  return out;
}

test("streamVerdict agrees with flashCompare: correct cases pass, a planted scale, spike or NaN fails", () => {
  const rng = new Rng(21);
  for (const plant of ["none", "scale", "spike", "nan"] as const) {
    for (let rep = 0; rep < 5; rep++) {
      const it = items(rng, plant);
      const p = plant === "scale" ? BF16 : P;
      const full = flashCompare(it, new Set(), "kernel", p, { mutations: false });
      const streamed = streamVerdict(it.map(summarise), p);
      expect(streamed.ok).toBe(full.ok);
      expect(streamed.ok).toBe(plant === "none");
      if (plant === "scale") expect(streamed.message).toContain("dk: systematic bias");
      if (plant === "spike") expect(streamed.message).toContain("y (sequence 1)");
      if (plant === "nan") expect(streamed.message).toContain("dalpha (sequence 2)[3] is NaN");
      // the bias statistic from the sums is the judge's slope (which its details keep to 4 digits)
      const dk = (full.details as { tensors: Record<string, { slope: number }> }).tensors.dk!;
      expect(Math.abs(streamed.tensors.dk!.slope - dk.slope)).toBeLessThanOrEqual(1e-15 + 1e-3 * Math.abs(dk.slope));
    }
  }
});

test("the plain reference's runs: one for the rules with a fast pair (Delta, Gated Delta, KDA, Comba, DPLR, Gated DeltaProduct, Hebbian, GLA, RWKV-6, GDN2, gated Oja), ten for every other rule with f32 sums, one with f64 sums", () => {
  const withFastPair = ["delta", "gated_delta", "kda", "comba", "dplr", "gated_delta_product", "hebbian", "gla", "rwkv6", "gdn2", "gated_oja"];
  for (const decl of RULES) {
    const fast = withFastPair.includes(decl.key);
    expect(plainRuns(decl).random).toBe(fast ? 0 : RANDOM_RUNS);
    expect(plainOrders("f32", plainRuns(decl)).length).toBe(fast ? 1 : 2 + RANDOM_RUNS);
    expect(plainOrders("f64", plainRuns(decl))).toEqual(["natural"]);
  }
  expect(plainOrders("f32", plainRuns(ruleByKey("delta")))).toEqual(["natural"]);
});
