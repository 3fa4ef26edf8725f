/**
 * A rule that declares why its kernels are not judged in the long regime (RuleDecl.longRegime) has
 * that regime left out of its regime cases, and the outcome names it; every other rule keeps all
 * four regimes (docs/spec/conformance.md#regime).
 */
import { expect, test } from "bun:test";
import { REGIMES, regimesOf, withRegimesNotJudged } from "../cases/kernel-batch.ts";
import { RULES } from "../src/rules/index.ts";

test("the regimes of each rule: all four unless it declares why long is not judged", () => {
  const declared = RULES.filter((r) => r.longRegime !== undefined).map((r) => r.key).sort();
  expect(declared).toEqual(["comba", "dplr"]);
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
