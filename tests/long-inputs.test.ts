/**
 * The long regime's input shapers (RuleDecl.longInputs, docs/spec/conformance.md#long-inputs): over
 * the generated long batches of Comba and DPLR (run seeds 1–10, three cases each), every token's
 * transition has operator norm at most 1 − m_t/2, the f64 reference stays bounded over the thousand
 * tokens, and the correction is not small beside the decay (the check stays informative). Without
 * the shaper the same cases grow past f32: the bound is what keeps them judgeable.
 */
import { describe, expect, test } from "bun:test";
import { sequencesOf } from "../conformance/kernel/native/abi-case.ts";
import { regimeBatchArb } from "../cases/kernel-batch.ts";
import { sampleOf } from "../cases/inner-case.ts";
import { combaMargin, dplrMargin, pullToward } from "../src/rules/long-inputs.ts";
import { RULES } from "../src/rules/index.ts";
import type { InnerInputs, RuleDecl } from "../src/rules/types.ts";
import { Rng } from "../src/rng.ts";

/** The 2-norm of a d × d matrix (power iteration on TᵀT). */
function opNorm(T: Float64Array, d: number): number {
  let x = Float64Array.from({ length: d }, (_, i) => 1 + 0.37 * i), lam = 0;
  for (let it = 0; it < 300; it++) {
    const y = new Float64Array(d), z = new Float64Array(d);
    for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) y[i]! += T[i * d + j]! * x[j]!;
    for (let j = 0; j < d; j++) for (let i = 0; i < d; i++) z[j]! += T[i * d + j]! * y[i]!;
    lam = Math.hypot(...z);
    x = z.map((v) => v / (lam || 1));
  }
  return Math.sqrt(lam);
}

/** Token t's transition (M_{t+1} = M_t T + ...) and the margin its gates leave. */
function transition(key: string, inp: InnerInputs, d: number, t: number): { T: Float64Array; m: number } {
  const o = t * d, T = new Float64Array(d * d);
  if (key === "comba") {
    const a = inp.alpha!.data[t]!, th = inp.theta!.data[t]!;
    for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) T[i * d + j] = (i === j ? 1 - a : 0) - th * inp.p!.data[o + i]! * inp.k.data[o + j]!;
    return { T, m: combaMargin(a, th) };
  }
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) T[i * d + j] = (i === j ? 1 - inp.alpha!.data[o + j]! : 0) + inp.a!.data[o + i]! * inp.b!.data[o + j]!;
  return { T, m: dplrMargin(inp.alpha!.data, o, d) };
}

/**
 * The long batches' sequences of run seeds 1–n, shaped or not: the largest transition norm over its
 * bound, max |y| of the f64 reference, and per sequence the correction's size over the decay's
 * (Comba: Σ_t θ‖M_t p − v‖ over Σ_t α‖M_t‖; DPLR: Σ_t ‖M_t a‖‖b‖ over Σ_t ‖M_t diag(α)‖).
 */
function sweep(decl: RuleDecl, seeds: number, shaped: boolean) {
  let excess = -Infinity, maxY = 0, tokens = 0;
  const ratios: number[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    for (const k of sampleOf(regimeBatchArb(decl, false, "long", [16, 64], "abi"), seed, 3)) {
      const { seqs, cfg } = sequencesOf(decl, { ...k, base: shaped ? k.base : { ...k.base, longInputs: undefined } }, false);
      const { d, seq_len: s } = cfg;
      for (const q of seqs) {
        const fw = decl.inner.forward(q.in64, q.st64, cfg);
        for (const v of fw.y.data) maxY = Math.max(maxY, Math.abs(v));
        const M = fw.saved.mStates!.data, inp = q.in64;
        let corr = 0, dec = 0;
        for (let t = 0; t < s; t++, tokens++) {
          const { T, m } = transition(decl.key, inp, d, t);
          excess = Math.max(excess, opNorm(T, d) - (1 - m / 2));
          const o = t * d, row = (i: number, v: ArrayLike<number>, sc = 0) => {
            let acc = 0;
            for (let j = 0; j < d; j++) acc += M[t * d * d + i * d + j]! * v[o + j]!;
            return acc - sc;
          };
          for (let i = 0; i < d; i++) {
            let mi = 0;
            for (let j = 0; j < d; j++) mi += (M[t * d * d + i * d + j]! * (decl.key === "comba" ? inp.alpha!.data[t]! : inp.alpha!.data[o + j]!)) ** 2;
            dec += Math.sqrt(mi);
            corr += decl.key === "comba" ? inp.theta!.data[t]! * Math.abs(row(i, inp.p!.data, inp.v.data[o + i]!)) : Math.abs(row(i, inp.a!.data));
          }
        }
        ratios.push(corr / dec);
      }
    }
  }
  ratios.sort((a, b) => a - b);
  return { excess, maxY, tokens, minRatio: ratios[0]!, medianRatio: ratios[Math.floor(ratios.length / 2)]! };
}

const SHAPING = RULES.filter((r) => r.longInputs !== undefined);

describe.each(SHAPING.map((r) => [r.key, r] as const))("%s: the long regime's shaped inputs", (_key, decl) => {
  test("contractive at every token, bounded over a thousand tokens, the correction kept", () => {
    const r = sweep(decl, 10, true);
    expect(r.tokens).toBeGreaterThan(30 * 1000);
    expect(r.excess).toBeLessThanOrEqual(1e-6); // ‖T_t‖ ≤ 1 − m_t/2
    expect(r.maxY).toBeLessThan(100);
    // measured at seeds 1–20: Comba's median 1.39 (min 0.99), DPLR's 1.20 (min 0.48)
    expect(r.minRatio).toBeGreaterThan(0.1);
    expect(r.medianRatio).toBeGreaterThan(0.5);
  }, 120_000);

  test("without the shaper the same cases are not contractive and grow past f32", () => {
    const r = sweep(decl, 4, false);
    expect(r.excess).toBeGreaterThan(0.5);
    expect(r.maxY).toBeGreaterThan(3.4e38);
  }, 120_000);
});

test("pullToward: a unit vector within rho of the target, the input itself when it is close already", () => {
  const rng = new Rng(5);
  for (let n = 0; n < 200; n++) {
    const d = 1 + (n % 5), x = new Float64Array(d), t = new Float64Array(d), out = new Float64Array(d);
    for (let i = 0; i < d; i++) { x[i] = rng.uniform(-1, 1); t[i] = rng.uniform(-1, 1); }
    const nx = Math.hypot(...x), nt = Math.hypot(...t);
    for (let i = 0; i < d; i++) { x[i]! /= nx; t[i]! /= nt; }
    const sign = n % 2 === 0 ? 1 : -1, rho = rng.uniform(0, 2);
    pullToward(x, t, sign, 0, d, rho, out);
    const dist = Math.hypot(...out.map((v, i) => v - sign * t[i]!)), was = Math.hypot(...x.map((v, i) => v - sign * t[i]!));
    expect(Math.abs(Math.hypot(...out) - 1)).toBeLessThan(1e-12);
    expect(dist).toBeLessThanOrEqual(Math.min(rho, was) + 1e-12);
    if (was <= rho) expect([...out]).toEqual([...x]);
  }
});
