/**
 * What a report says of its run besides the checks: per kernel backend, the rule variants of the
 * selection it does not implement (`run.backends[].unimplemented`, the same as the line printed
 * after the run: docs/spec/conformance.md#undeclared), and a worker lane that failed (one stderr
 * line naming the failure, its checks run on the main thread with their verdicts, and the same line
 * in `run.warnings`: docs/spec/conformance.md#run-warnings). Both reports are schema-valid.
 * Planted, each seen to fail this test: runReport leaving the backends as probed (no
 * `unimplemented`); the lane's failure printed as before (its whole stack) and kept out of the
 * report; the failure recorded but still printed with its stack.
 */
import { expect, spyOn, test } from "bun:test";
import { UNDECLARED_DETAILS, type CheckDef, type CheckResult } from "../harness/check.ts";
import { validateReport } from "../harness/report.ts";
import { adoptEnvironment, environment } from "../environment.ts";
import { runPlan, type RunOutcome } from "../conformance/parallel.ts";
import { catalogueSettings, CLI_NAMES, type RunPlan, type RunRequest } from "../conformance/plan.ts";
import { runReport, undeclaredLines } from "../conformance/run-report.ts";
import { check } from "./synthetic-report.ts";

function planOf(defs: readonly CheckDef[]): RunPlan {
  const request = { seed: 1, profile: "quick", filters: [], fixtureDirs: [], reportPath: null, names: CLI_NAMES } as RunRequest;
  // a worker builds the generators the catalogue names for its job: here one that holds none of these checks
  const catalogue = { checks: defs, backends: () => [], generatorsOf: () => ["c0Ops"] };
  return { request, settings: catalogueSettings(request), catalogue, defs, selected: new Set(defs.map((d) => d.id)) } as unknown as RunPlan;
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
  const outcome: RunOutcome = { results, backends, interrupt: null, warnings: [] };
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
  expect(report.run.warnings).toBeUndefined();
});

/** A delegated check the workers' catalogue does not hold: its lane's worker fails on it ("no check ... in the worker's catalogue"). */
const planted = (id: string, child: string): CheckDef => ({
  kind: "delegated", id, class: "C5", subject: { rule: "delta", backend: "planted" }, spec: "docs/spec/conformance.md#one-scheduler", tolerance: {},
  needs: { child },
  delegate: (o) => ({ status: "pass", runs: 1, seed: o.seed, path: "" }),
});

test("a worker lane that fails: one stderr line names it, its checks run on the main thread, run.warnings keeps the line", async () => {
  // two batches (two children): the runner gives each a worker lane
  const defs = [planted("C5/planted/delta/a", "planted child a"), planted("C5/planted/delta/b", "planted child b")];
  const plan = planOf(defs);
  const saved = environment();
  adoptEnvironment({ ...saved, NLC_SERIAL: "0" });
  const errors: string[] = [];
  const spy = spyOn(console, "error").mockImplementation((...args: unknown[]) => void errors.push(args.map(String).join(" ")));
  let outcome: RunOutcome;
  try {
    outcome = await runPlan(plan);
  } finally {
    spy.mockRestore();
    adoptEnvironment(saved);
  }
  // the main thread ran both, with their verdicts
  expect(outcome.results.map((r) => [r.id, r.status])).toEqual(defs.map((d) => [d.id, "pass"]));
  const lines = defs.map((d) => `a check worker failed: Error: no check ${d.id} in the worker's catalogue; its 1 unreported of 1 checks run on the main thread`);
  expect([...outcome.warnings].sort()).toEqual(lines);
  // one line each on stderr, no stack
  expect([...errors].sort()).toEqual(lines.map((l) => `conformance: ${l}`));
  const report = runReport(plan, outcome, new Date());
  validateReport(report);
  expect([...report.run.warnings ?? []].sort()).toEqual(lines);
  expect(report.summary.pass).toBe(2);
}, 120_000);
