/**
 * MAC model cases are informative (docs/spec/tolerances.md#mac-inputs): the MLP memories' w_theta
 * gradients stay well above the ULP checks' vacuity floor, and the C3/C7 MAC checks that were
 * vacuous or gave up at some run seeds pass there without discarding most of their cases.
 */
import { expect, test } from "bun:test";
import { c3Checks } from "../conformance/c3/hand-written.ts";
import { c7Checks } from "../conformance/c7/checks.ts";
import { runCheck } from "../harness/run.ts";
import { FIXED, independentDraws, sameRule, SIZES, specArb } from "../cases/model-arb.ts";
import { buildModelCase } from "../cases/model-case.ts";
import { cmsStep } from "../oracle/cms-backward.ts";
import { TOL_ULP, VACUITY_FACTOR } from "../oracle/compare.ts";

const FLOOR = VACUITY_FACTOR * TOL_ULP.atol;

test.each(["memora", "moneta", "yaad"] as const)("MAC %s, k = 4: w_theta gradients above the floor in all but a few of 100 cases, all finite", (rule) => {
  const specs = independentDraws(specArb(sameRule(rule, 4), SIZES, FIXED, "random", "mac"), 100, 99);
  let below = 0;
  for (const spec of specs) {
    const c = buildModelCase(spec);
    const r = cmsStep(c.model, c.params, c.batch, [true, true, true, true], c.context);
    let m = Infinity;
    for (const g of r.grads.levels) {
      let mx = 0;
      for (const x of g.w_theta!.data) {
        expect(Number.isFinite(x)).toBe(true);
        mx = Math.max(mx, Math.abs(x));
      }
      m = Math.min(m, mx);
    }
    if (m < FLOOR) below++;
  }
  expect(below).toBeLessThanOrEqual(5);
});

const ids = (id: string) => id.startsWith("C3/mac/memora/k4/") || id === "C7/learned-gate/mac/memora/k4" || id === "C3/mac/moneta/k4/frozen-1";
const defs = [...c3Checks(), ...c7Checks()].filter((d) => ids(d.id));

test.each([10, 13, 16, 19, 34, 184])("the MAC MEMORA k = 4 checks pass at run seed %d (vacuous, gave up, or NaN at W_v x4 there before)", (seed) => {
  expect(defs.length).toBe(9);
  for (const def of defs) {
    const r = runCheck(def, { seed, profile: "default" });
    expect(`${def.id}: ${r.status}`, r.message).toBe(`${def.id}: pass`);
  }
});

test("the wider draws are for generated cases only: C7's training loops keep the plain ones", async () => {
  const { fixedSpec } = await import("../cases/model-arb.ts");
  expect(fixedSpec(["hebbian"], 307, { pattern: "mac" }).scales).toBeUndefined();
  const [spec] = independentDraws(specArb(sameRule("hebbian", 1), SIZES, FIXED, "random", "mac"), 1, 1);
  expect(spec!.scales).toEqual({ W_v: 2, W_embed: 2 });
});
