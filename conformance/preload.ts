/** `bun test` preload: after all test files ran, write the conformance report of what ran. */
import { afterAll } from "bun:test";
import { collected, envOptions } from "../harness/collect.ts";
import { closingLine, runInfo, summarize, writeReport, type BackendInfo } from "../harness/report.ts";

const started = new Date();
/** Set by the test file: the backends of the catalogue it ran, read when the report is written. */
export const reportBackends: { get: () => BackendInfo[] } = { get: () => [] };

afterAll(() => {
  if (collected.length === 0) return;
  const opts = envOptions();
  const sorted = [...collected].sort((a, b) => a.id.localeCompare(b.id));
  const report = {
    format: "nlc-report/1" as const,
    run: runInfo(started, opts.seed, opts.profile, opts.filters.join(",") || null, reportBackends.get(), opts.shard),
    summary: summarize(sorted),
    checks: sorted,
  };
  writeReport(report, opts.report);
  console.log(`\n${closingLine(report.summary)}\nreport: ${opts.report ?? "reports/conformance.json"}`);
});
