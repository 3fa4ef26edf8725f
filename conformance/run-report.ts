/**
 * The report of a run, written the same way by `npm run conformance` and `bun test`
 * (docs/spec/conformance.md#one-scheduler): the checks in catalogue order; an interrupted run's
 * results go beside the complete report, marked partial, never over it
 * (docs/spec/conformance.md#partial-report).
 */
import { rmSync } from "node:fs";
import { closingLine, isGreen, notRunOf, runInfo, summarize, writeReport, type Report } from "../harness/report.ts";
import { partialPath } from "../harness/interrupt.ts";
import type { RunOutcome } from "./parallel.ts";
import type { RunPlan } from "./plan.ts";

export interface WrittenReport {
  report: Report;
  /** Where it went (the partial path after an interrupt); null when the run writes no report. */
  path: string | null;
  /** The closing line CI reads. */
  line: string;
  /** Complete, something ran, nothing failed. */
  green: boolean;
}

export function runReport(plan: RunPlan, outcome: RunOutcome, started: Date): Report {
  const req = plan.request;
  const run = runInfo(started, req.seed, req.profile, [...req.filters, ...(req.rule === undefined ? [] : [`rule=${req.rule}`])].join(",") || null, outcome.backends, req.shard, plan.defs.length);
  return {
    format: "nlc-report/1",
    ...(outcome.interrupt !== null ? { partial: true as const } : {}),
    run,
    summary: summarize(outcome.results, req.minPower),
    checks: outcome.results,
  };
}

/** Writes the run's report (or its partial report) and says what to print last. */
export function writeRunReport(plan: RunPlan, outcome: RunOutcome, started: Date, log: (s: string) => void = console.log): WrittenReport {
  const report = runReport(plan, outcome, started);
  const target = plan.request.reportPath;
  let path: string | null = null;
  if (outcome.interrupt !== null) {
    log(`conformance: interrupted by ${outcome.interrupt} after ${outcome.results.length} of ${plan.defs.length} checks`);
    if (target !== null) {
      path = partialPath(target);
      writeReport(report, path);
      log(`partial report: ${path} (${target} is left as it was)`);
    }
  } else if (target !== null) {
    path = target;
    writeReport(report, path);
    // A partial report left by an earlier interrupted run no longer describes the latest one.
    rmSync(partialPath(path), { force: true });
    log(`report: ${path}`);
  }
  // An empty selection (a shard left with no check) is not a failure of the run.
  const s = report.summary;
  const green = plan.defs.length === 0 ? outcome.interrupt === null && s.fail + s.vacuous + s.error === 0 : isGreen(report);
  return { report, path, line: closingLine(report.summary, notRunOf(report)), green };
}
