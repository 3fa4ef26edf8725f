/**
 * What a report says of its run besides the checks: per kernel backend, the rule variants of the
 * selection it does not implement (`run.backends[].unimplemented`, the same as the line printed
 * after the run: docs/spec/conformance.md#undeclared). The report is schema-valid.
 * Planted, seen to fail this test: runReport leaving the backends as probed (no `unimplemented`).
 */
import { expect, test } from "bun:test";
import { UNDECLARED_DETAILS, type CheckDef, type CheckResult } from "../harness/check.ts";
import { validateReport } from "../harness/report.ts";
import type { RunOutcome } from "../conformance/parallel.ts";
import { CLI_NAMES, type RunPlan, type RunRequest } from "../conformance/plan.ts";
import { runReport, undeclaredLines } from "../conformance/run-report.ts";
import { check } from "./synthetic-report.ts";

function planOf(defs: readonly CheckDef[]): RunPlan {
  const request = { seed: 1, profile: "quick", filters: [], fixtureDirs: [], reportPath: null, names: CLI_NAMES } as RunRequest;
  return { request, catalogue: { checks: defs, backends: () => [] }, defs, selected: new Set(defs.map((d) => d.id)) } as unknown as RunPlan;
}

const PY = "py:kernel.py:k";
const kernel = (variant: string, status: CheckResult["status"], backend = PY): CheckResult => {
  const [rule, frozen] = variant.split(".");
  return check(`C5/${backend.replace(/[:.]/g, "-")}/${variant}/forward`, status, {
    subject: { rule, ...(frozen !== undefined ? { frozen: true } : {}), backend },
    ...(status === "skip" ? { message: `${PY} does not declare ${variant}`, details: UNDECLARED_DETAILS } : {}),
  });
};

test("the report names, per backend, the rule variants it does not implement and how many checks that left out", () => {
  const other = "lib:/x/libk.so@k";
  const results = [kernel("delta", "pass"), kernel("delta.frozen", "skip"), kernel("titans", "skip"), kernel("titans.frozen", "skip"), kernel("titans", "skip", other), kernel("delta", "pass", other)];
  const backends = [{ name: "ref", available: true }, { name: PY, available: true }, { name: other, available: true }];
  const outcome: RunOutcome = { results, backends, interrupt: null };
  const report = runReport(planOf(results.map((r) => ({ id: r.id }) as CheckDef)), outcome, new Date());
  validateReport(report);
  expect(report.run.backends).toEqual([
    { name: "ref", available: true },
    { name: PY, available: true, unimplemented: { variants: ["delta.frozen", "titans", "titans.frozen"], checks: 3 } },
    { name: other, available: true, unimplemented: { variants: ["titans"], checks: 1 } },
  ]);
  // no check of the run, and the printed line says the same
  expect(report.checks.map((c) => c.id)).toEqual([results[0]!.id, results[5]!.id]);
  expect(undeclaredLines(results)).toEqual([
    `backend ${PY}: does not implement delta.frozen, titans, titans.frozen (3 checks not run; docs/spec/conformance.md#undeclared)`,
    `backend ${other}: does not implement titans (1 checks not run; docs/spec/conformance.md#undeclared)`,
  ]);
});
