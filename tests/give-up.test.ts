/**
 * A property run fast-check gives up on (too many near-zero cases discarded) is vacuous with a
 * message naming the counts and the reason, never an error reading `null`; its replay line (an
 * empty path) re-runs the whole property and reproduces the verdict (docs/spec/tolerances.md#vacuous).
 */
import { expect, test } from "bun:test";
import type { PropertyCheck } from "../harness/check.ts";
import { runCheck } from "../harness/run.ts";
import { ruleCaseSpecArb } from "../cases/rule-case.ts";
import { ruleByKey } from "../src/rules/index.ts";

/** Two of three cases informative, the rest near-zero: fast-check gives up before three informative ones. */
function mostlyNearZero(): PropertyCheck<{ seed: number }> {
  return {
    kind: "property", id: "T/give-up", class: "C3", subject: {}, spec: "docs/spec/tolerances.md#vacuous", tolerance: {},
    runs: { quick: 3, default: 3, deep: 3 }, arb: ruleCaseSpecArb(ruleByKey("delta")),
    run: ({ seed: x }) => (x % 5 === 0 ? { ok: true } : { ok: false, vacuous: true, message: `case ${x}: max |ref| 1e-11` }),
  };
}

test("a run fast-check gives up on is vacuous, with the discarded count and the reason", () => {
  const r = runCheck(mostlyNearZero(), { seed: 3, profile: "default" });
  expect(r.status).toBe("vacuous");
  expect(r.message).toMatch(/^fast-check gave up: \d+ generated cases were discarded as vacuous .*last discarded: case \d+: max \|ref\| 1e-11$/);
  expect(r.message).not.toContain("null");
});

test("its replay line (empty path) reproduces the verdict", () => {
  const def = mostlyNearZero();
  const r = runCheck(def, { seed: 3, profile: "default" });
  expect(r.path).toBe("");
  const again = runCheck(def, { seed: 3, profile: "default", replay: { seed: r.seed, path: r.path } });
  expect(again.status).toBe(r.status);
  expect(again.message).toBe(r.message);
});
