/** Small, schema-valid nlc-report/1 documents for the tests of the report tools. */
import type { CheckResult, Status } from "../harness/check.ts";
import { summarize, type Report } from "../harness/report.ts";

/** One check result; `ratio` sets worst.abs against an absolute tolerance of 1e-6. */
export function check(id: string, status: Status, extra: Partial<CheckResult> & { ratio?: number } = {}): CheckResult {
  const { ratio, ...rest } = extra;
  const cls = (id.split("/")[0] ?? "C2") as CheckResult["class"];
  return {
    id, class: cls, subject: { rule: "moneta", k: 1, dtype: "f64" }, status,
    tolerance: { rtol: 0, atol: 1e-6 }, runs: status === "skip" ? 0 : 10, seed: 7, path: status === "fail" ? "3:1" : "",
    replay: `npm run conformance -- --replay ${id}:7:${status === "fail" ? "3:1" : ""}`, ms: 5, spec: "docs/spec/conformance.md#c2",
    ...(ratio !== undefined ? { worst: { abs: ratio * 1e-6, rel: ratio * 1e-6, tensor: "dW", index: 0 } } : {}),
    ...(status === "fail" ? { message: "dW: |a-b| = 3e-3 > tolerance at index 0" } : {}),
    ...rest,
  };
}

export function report(checks: CheckResult[], run: Partial<Report["run"]> = {}): Report {
  return {
    format: "nlc-report/1",
    run: {
      started: "2026-01-01T00:00:00.000Z", ended: "2026-01-01T00:00:01.000Z", version: "0.1.0", revision: null,
      runtime: "bun test", os: "linux", cpu: "x1", seed: 1, profile: "default", filter: null,
      backends: [{ name: "ref", available: true }], ...run,
    },
    summary: summarize(checks),
    checks,
  };
}
