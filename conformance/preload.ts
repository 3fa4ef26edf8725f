/** `bun test` preload: after all test files ran, write the conformance report of what ran. */
import { afterAll } from "bun:test";
import { collected, envOptions } from "../harness/collect.ts";
import { closingLine, DEFAULT_REPORT, runInfo, summarize, writeReport, type BackendInfo } from "../harness/report.ts";
import { interruptedBy, partialPath } from "../harness/interrupt.ts";

const started = new Date();
/** Set by the test file: the backends of the catalogue it ran, read when the report is written. */
export const reportBackends: { get: () => BackendInfo[] } = { get: () => [] };

afterAll(() => {
  if (collected.length === 0) return;
  const opts = envOptions();
  const sorted = [...collected].sort((a, b) => a.id.localeCompare(b.id));
  const interrupt = interruptedBy();
  const report = {
    format: "nlc-report/1" as const,
    ...(interrupt !== null ? { partial: true as const } : {}),
    run: runInfo(started, opts.seed, opts.profile, opts.filters.join(",") || null, reportBackends.get(), opts.shard),
    summary: summarize(sorted),
    checks: sorted,
  };
  // An interrupted run never replaces a complete report: it goes beside it, marked partial.
  const path = interrupt !== null ? partialPath(opts.report ?? DEFAULT_REPORT) : opts.report ?? DEFAULT_REPORT;
  writeReport(report, path);
  if (interrupt !== null) console.log(`\ninterrupted by ${interrupt}: partial report ${path}`);
  console.log(`\n${closingLine(report.summary)}\nreport: ${path}`);
});
