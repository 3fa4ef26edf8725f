/**
 * The report of a run, written the same way by `npm run conformance` and `bun test`
 * (docs/spec/conformance.md#one-scheduler): the checks in catalogue order; an interrupted run's
 * results go beside the complete report, marked partial, never over it
 * (docs/spec/conformance.md#partial-report).
 */
import { existsSync, rmSync } from "node:fs";
import { closingLine, failedPath, isGreen, notRunOf, readReportFile, runInfo, summarize, writeReport, type Report, type Unimplemented } from "../harness/report.ts";
import { matchesFilter } from "./catalogue.ts";
import { partialPath } from "../harness/interrupt.ts";
import type { RunOutcome } from "./parallel.ts";
import { isUndeclared, type CheckResult } from "../harness/check.ts";
import { variantKey } from "../src/rules/level.ts";
import type { RunPlan } from "./plan.ts";

export { failedPath };

export interface WrittenReport {
  report: Report;
  /** Where it went (the partial path after an interrupt); null when the run writes no report. */
  path: string | null;
  /** The closing line CI reads. */
  line: string;
  /** Complete, something ran, nothing failed. */
  green: boolean;
}

/**
 * Why a finished run tested nothing it was asked to (docs/spec/conformance.md#nothing-ran): every
 * selected check skipped; a backend named by --backend or the config file that ran no check (with
 * its reason); an entry of the config's `require` that selects no passing check. Empty when
 * something ran, when --allow-skipped says an empty run is fine, and for an interrupted run or an
 * empty shard. Each reason is one line naming its cause, "nothing ran: ..." where nothing did (a
 * required entry whose checks ran and failed says that it did not pass instead).
 */
export function nothingRan(plan: RunPlan, outcome: RunOutcome): string[] {
  const req = plan.request;
  if (req.allowSkipped === true || outcome.interrupt !== null || plan.defs.length === 0) return [];
  const results = outcome.results.filter((r) => !isUndeclared(r));
  const undeclared = new Map([...unimplementedByBackend(outcome.results)].map(([b, u]) => [b, u.variants]));
  const out: string[] = [];
  const ran = (r: { status: string }) => r.status !== "skip";
  if (results.length === 0 && undeclared.size > 0) {
    out.push(`nothing ran: the selection holds only rules its kernels do not implement (${[...undeclared.values()].flat().slice(0, 5).join(", ")}${[...undeclared.values()].flat().length > 5 ? ", ..." : ""})`);
  } else if (!results.some(ran)) {
    const reasons = [...new Set(results.map((r) => r.message ?? "").filter((m) => m !== ""))];
    out.push(`nothing ran: every selected check (${results.length}) was skipped${reasons.length > 0 ? `: ${reasons.slice(0, 3).join("; ")}${reasons.length > 3 ? `; ... (${reasons.length - 3} more reasons)` : ""}` : ""}`);
  }
  for (const name of req.explicitBackends ?? []) {
    if (name === "ref") continue;
    const mine = results.filter((r) => r.subject.backend === name);
    if (mine.some(ran)) continue;
    const info = outcome.backends.find((b) => b.name === name);
    const why = info !== undefined && !info.available && info.reason !== undefined && !info.reason.startsWith("not run") ? `: unavailable (${info.reason})`
      : mine.length === 0 ? (undeclared.has(name) ? ": it implements none of the selected rules" : ": the selection holds none of its checks") : `: its ${mine.length} checks were skipped (${mine[0]!.message ?? "?"})`;
    out.push(`nothing ran: backend ${name} ran no check${why}`);
  }
  for (const f of req.require ?? []) {
    const mine = results.filter((r) => matchesFilter({ id: r.id, class: r.class, subject: r.subject }, [f]));
    if (mine.some((r) => r.status === "pass")) continue;
    const where = `required '${f}' (${req.configPath ?? "config"} require)`;
    const ranOf = mine.filter(ran);
    if (ranOf.length > 0) {
      const by = (["fail", "vacuous", "error"] as const).map((st) => [st, ranOf.filter((r) => r.status === st).length] as const).filter(([, n]) => n > 0);
      out.push(`${where} did not pass: its ${ranOf.length} check${ranOf.length === 1 ? "" : "s"} that ran passed none (${by.map(([st, n]) => `${n} ${st}`).join(", ")})`);
    } else out.push(`nothing ran: ${where}${mine.length === 0 ? " selects no check of this run" : `: its ${mine.length} checks were skipped (${mine[0]!.message ?? "?"})`}`);
  }
  return out;
}


/**
 * Per backend, the rule variants of the run's skips that it does not implement (UNDECLARED_DETAILS,
 * docs/spec/conformance.md#undeclared), in the order the checks ran, and how many checks that was:
 * the report's `run.backends[].unimplemented` and the line printed after the run.
 */
export function unimplementedByBackend(results: readonly CheckResult[]): Map<string, Unimplemented> {
  const out = new Map<string, Unimplemented>();
  for (const r of results) {
    if (!isUndeclared(r) || r.subject.backend === undefined) continue;
    const mine = out.get(r.subject.backend) ?? { variants: [], checks: 0 };
    mine.checks++;
    const key = r.subject.rule === undefined ? undefined : variantKey(r.subject.rule, r.subject.frozen === true);
    if (key !== undefined && !mine.variants.includes(key)) mine.variants.push(key);
    out.set(r.subject.backend, mine);
  }
  return out;
}

/** One line per backend for the checks of rules it does not implement: none of them is a check of the run. */
export function undeclaredLines(results: readonly CheckResult[]): string[] {
  return [...unimplementedByBackend(results)].map(([backend, u]) =>
    `backend ${backend}: does not implement ${u.variants.join(", ")} (${u.checks} checks not run; docs/spec/conformance.md#undeclared)`);
}

/** Whether `path` holds a complete report that passed, something having run (a failed or empty run must not replace it; a report of skips alone is replaced). */
function holdsPassingReport(path: string): boolean {
  if (!existsSync(path)) return false;
  try {
    return isGreen(readReportFile(path));
  } catch {
    return false;
  }
}

export function runReport(plan: RunPlan, outcome: RunOutcome, started: Date): Report {
  const req = plan.request;
  // the checks of rules a kernel does not implement are not the run's (undeclaredLines says so)
  const checks = outcome.results.filter((r) => !isUndeclared(r));
  const unimplemented = unimplementedByBackend(outcome.results);
  const backends = outcome.backends.map((b) => (unimplemented.has(b.name) ? { ...b, unimplemented: unimplemented.get(b.name)! } : b));
  const run = {
    ...runInfo(started, req.seed, req.profile, [...req.filters, ...(req.rule === undefined ? [] : [`rule=${req.rule}`])].join(",") || null, backends, req.shard, plan.defs.length),
    ...(outcome.warnings.length > 0 ? { warnings: outcome.warnings } : {}),
  };
  return {
    format: "nlc-report/1",
    ...(outcome.interrupt !== null ? { partial: true as const } : {}),
    run,
    summary: summarize(checks, req.minPower),
    checks,
  };
}

/**
 * Writes the run's report (or its partial report) and says what to print last. `empty`: the
 * reasons nothingRan gave (the run is then not green). A run that is not green never replaces a
 * report that passed: it goes beside it (failedPath) and the log says where.
 */
export function writeRunReport(plan: RunPlan, outcome: RunOutcome, started: Date, log: (s: string) => void = console.log, empty: readonly string[] = []): WrittenReport {
  const report = runReport(plan, outcome, started);
  // An empty selection (a shard left with no check) is not a failure of the run.
  const s = report.summary;
  const green = empty.length === 0 && (plan.defs.length === 0 ? outcome.interrupt === null && s.fail + s.vacuous + s.error === 0 : isGreen(report, plan.request.allowSkipped === true));
  const target = plan.request.reportPath;
  let path: string | null = null;
  if (outcome.interrupt !== null) {
    log(`conformance: interrupted by ${outcome.interrupt} after ${outcome.results.length} of ${plan.defs.length} checks`);
    if (target !== null) {
      path = partialPath(target);
      writeReport(report, path);
      log(`partial report: ${path} (${target} is left as it was)`);
    }
  } else if (target !== null && !green && holdsPassingReport(target)) {
    path = failedPath(target);
    writeReport(report, path);
    log(`report: ${path} (this run did not pass: ${target}, which passed, is left as it was)`);
  } else if (target !== null) {
    path = target;
    writeReport(report, path);
    // A partial report left by an earlier interrupted run, or the report of a failed run kept
    // beside a passing one, no longer describes the latest run.
    rmSync(partialPath(path), { force: true });
    rmSync(failedPath(path), { force: true });
    log(`report: ${path}`);
  }
  return { report, path, line: closingLine(report.summary, notRunOf(report)), green };
}
