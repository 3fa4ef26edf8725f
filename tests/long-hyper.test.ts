/**
 * Moneta at q > 2 over a thousand tokens: the Jacobian of N_q grows like ‖A‖^{2−q} as the
 * accumulator fades, and the backward explodes (regime sweep of the f32 and bf16 builds: dk at a
 * scale of 2465 for q = 2.95, d = 1, the correct kernel 1.06 times its bound; dv at 3.8e21 for
 * q = 2.94, d = 4, the plain f32 reference overflowing). The `long` regime keeps q to its declared
 * longSample, q = 2; every other regime keeps the sampled q (docs/spec/conformance.md#regime).
 */
import { expect, test } from "bun:test";
import { regimeCase, type RuleCaseSpec } from "../cases/rule-case.ts";
import { RULES, ruleByKey } from "../src/rules/index.ts";

const moneta = ruleByKey("moneta");
const spec = (q: number, d: number): RuleCaseSpec => ({
  d, seq_len: 4, hyper: { d_hidden: 2, p: 1, q, lambda_2: 0, sign_sharpness: 5.38 }, alpha: "mid", theta: "small", state: "init", seed: 5,
});

test("the seed-8 and seed-6 cases get q = 2 in the long regime, and keep q elsewhere", () => {
  expect(regimeCase(moneta, spec(2.937307357788086, 4), { regime: "long", d: 4, T: 1027 }).hyper.q).toBe(2);
  expect(regimeCase(moneta, spec(2.9530563354492188, 1), { regime: "long", d: 1, T: 1002 }).hyper.q).toBe(2);
  for (const regime of ["boundary", "wide", "heads"]) expect(regimeCase(moneta, spec(2.95, 4), { regime, d: 4, T: 17 }).hyper.q).toBe(2.95);
  // d and T as the regime says, the rest of the case unchanged
  const c = regimeCase(moneta, spec(2.95, 4), { regime: "long", d: 3, T: 1010 });
  expect({ ...c, hyper: { ...c.hyper, q: 2.95 } } as unknown).toEqual({ ...spec(2.95, 4), d: 3, seq_len: 1010 });
});

test("a longSample lies inside the hyperparameter's range and its sampled range", () => {
  for (const decl of RULES) {
    for (const [name, h] of Object.entries(decl.hyper)) {
      if (h.kind !== "real" || h.longSample === undefined) continue;
      const [lo, hi] = h.longSample, [slo, shi] = h.sample ?? [h.min, h.max];
      expect(`${decl.key}.${name}: ${lo <= hi && lo >= Math.max(h.min, slo) && hi <= Math.min(h.max, shi)}`).toBe(`${decl.key}.${name}: true`);
    }
  }
});
