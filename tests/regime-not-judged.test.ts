/**
 * A rule that declares why its kernels are not judged in the long regime (RuleDecl.longRegime) has
 * that regime left out of its regime cases, and the outcome names it; every other rule keeps all
 * four regimes (docs/spec/conformance.md#regime). A rule whose recurrence is not contractive for
 * independently drawn inputs declares how the long regime draws its inputs instead (RuleDecl.longInputs,
 * docs/spec/conformance.md#long-inputs): Comba and DPLR, judged there.
 */
import { expect, test } from "bun:test";
import { REGIMES, regimesOf, withRegimesNotJudged } from "../cases/kernel-regimes.ts";
import { RULES } from "../src/rules/index.ts";
import { regimeCase, type RuleCaseSpec } from "../cases/rule-case.ts";

test("the regimes of each rule: all four unless it declares why long is not judged", () => {
  const declared = RULES.filter((r) => r.longRegime !== undefined).map((r) => r.key).sort();
  // none since Comba and DPLR draw contractive inputs there (RuleDecl.longInputs): a rule gaining the declaration fails here
  expect(declared).toEqual([]);
  for (const r of RULES) {
    expect({ rule: r.key, regimes: regimesOf(r) }).toEqual({ rule: r.key, regimes: r.longRegime === undefined ? [...REGIMES] : REGIMES.filter((x) => x !== "long") });
    if (r.longRegime !== undefined) expect(r.longRegime.length).toBeGreaterThan(40); // a measured reason, not a flag
  }
});

test("a regime case's outcome names the regimes left out, and only for such a rule", () => {
  const o: { ok: boolean; details?: Readonly<Record<string, unknown>> } = { ok: true, details: { regime: "regime wide (B=1 T=17 H=1 d=96 C=16)" } };
  expect(withRegimesNotJudged(o, {})).toBe(o);
  const named = withRegimesNotJudged(o, { longRegime: "grows past f32" });
  expect(named.details).toEqual({ regime: "regime wide (B=1 T=17 H=1 d=96 C=16)", regimes_not_judged: { long: "grows past f32" } });
});

test("the rules that shape their long-regime inputs are judged there, and only their long cases are shaped", () => {
  const shaping = RULES.filter((r) => r.longInputs !== undefined).map((r) => r.key).sort();
  expect(shaping).toEqual(["comba", "dplr"]);
  const base: RuleCaseSpec = { d: 2, seq_len: 3, hyper: {}, alpha: "mid", theta: "large", state: "init", seed: 7 };
  for (const r of RULES) {
    if (r.longInputs !== undefined) expect({ rule: r.key, regimes: regimesOf(r) }).toEqual({ rule: r.key, regimes: [...REGIMES] });
    for (const regime of REGIMES) {
      const c = regimeCase(r, { ...base, hyper: {} }, { regime, d: 2, T: regime === "long" ? 1000 : 17 });
      expect({ rule: r.key, regime, shaped: c.longInputs === true }).toEqual({ rule: r.key, regime, shaped: regime === "long" && r.longInputs !== undefined });
    }
  }
});
