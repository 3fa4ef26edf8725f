/**
 * The subcommands that work on finished reports (no check runs):
 *   diff OLD NEW                 what changed between two reports; exit 1 on a regression
 *   html REPORT [--out FILE]     one static HTML page: the status matrix with click-through
 *   merge A B ... --out FILE     the shards' reports as one report
 *   timings REPORT               refresh the table of check times sharding balances with
 * Usage errors (a missing or invalid report file, wrong arguments) exit 2 and name the file.
 */
import { diffReports, formatDiff, isRegression } from "../harness/report-diff.ts";
import { readReportFile, ReportFileError } from "../harness/report.ts";
import { reportHtml } from "../harness/report-html.ts";
import { mergeReports, MergeError } from "../harness/report-merge.ts";
import { CHECK_TIMES, formatTimes, loadTimes, mergeTimes, timesFromReport } from "../harness/shard.ts";
import { writeReport } from "../harness/report.ts";
import { UsageError } from "../harness/usage-error.ts";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { junitXml, markdownSummary } from "../harness/report-ci.ts";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { environment } from "../environment.ts";

export const REPORT_COMMANDS = ["diff", "html", "merge", "timings", "junit", "markdown"] as const;
export type ReportCommand = (typeof REPORT_COMMANDS)[number];

export const REPORT_COMMANDS_HELP = `Report commands (they run no checks):
  diff OLD NEW     compare two reports: new failures, fixed checks, checks that disappeared
                   or appeared, and passing checks whose error-to-bound ratio grew over 10x;
                   exit 1 on a regression (a new failure, a disappeared check, such growth)
  html REPORT [--out FILE]
                   write one static HTML page (default: REPORT with .html): failures and
                   blind spots first, a per-backend summary, a legend, then a matrix of
                   rule x variant by k x backend x dtype coloured by status, each cell
                   listing its checks (message, worst error, tolerance, replay command)
  merge A B ... --out FILE
                   merge the reports of the shards of one run (--shard i/n, NLC_SHARD) into
                   one report; parts from different versions, revisions, seeds, profiles or
                   filters, a check in two parts, or a missing shard are usage errors (exit 2)
  junit REPORT [--out FILE]
                   write the report as JUnit XML (default: REPORT with .junit.xml): a testcase
                   per check; fail and vacuous are failures, error an error, skip skipped
  markdown REPORT [--out FILE]
                   a markdown summary (closing line, counts, unavailable backends, every
                   check that did not pass with its replay command): to FILE, else appended
                   to $GITHUB_STEP_SUMMARY when set, else stdout
  timings REPORT   merge the checks' measured times from REPORT into
                   conformance/data/check-times.json, the table --shard balances with
                   (checks REPORT did not run keep their times; a partial report is refused)`;

function usage(msg: string): never {
  throw new UsageError(msg);
}

function diff(args: string[]): number {
  if (args.length !== 2) usage(`diff expects two report files (OLD NEW), got ${args.length}`);
  const [oldPath, newPath] = args as [string, string];
  const d = diffReports(readReportFile(oldPath), readReportFile(newPath));
  console.log(formatDiff(d, oldPath, newPath));
  return isRegression(d) ? 1 : 0;
}

function html(argv: string[]): number {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { out: { type: "string" } }, allowPositionals: true });
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  if (parsed.positionals.length !== 1) usage(`html expects one report file, got ${parsed.positionals.length}`);
  const src = parsed.positionals[0]!;
  const out = parsed.values.out ?? src.replace(/\.json$/, "") + ".html";
  const page = reportHtml(readReportFile(src), src);
  try {
    mkdirSync(dirname(resolve(out)), { recursive: true });
    writeFileSync(out, page);
  } catch (e) {
    usage(`--out ${out}: ${e instanceof Error ? e.message : String(e)}`);
  }
  console.log(`html: ${out}`);
  return 0;
}

/**
 * The command line of a merge (`merge`, `sweep-merge`): the files to join and `--out FILE`; a
 * missing piece is a usage error naming the command.
 */
export function mergeArgs(argv: string[], command: string, files: string, fail: (msg: string) => never): { out: string; files: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { out: { type: "string" } }, allowPositionals: true });
  } catch (e) {
    fail(e instanceof Error ? e.message : String(e));
  }
  const out = parsed.values.out;
  if (out === undefined) fail(`${command} needs --out FILE`);
  if (parsed.positionals.length === 0) fail(`${command} expects ${files}`);
  return { out, files: parsed.positionals };
}

function merge(argv: string[]): number {
  const { out, files } = mergeArgs(argv, "merge", "the report files of the shards", usage);
  const merged = mergeReports(files.map((path) => ({ path, report: readReportFile(path) })));
  try {
    writeReport(merged, out);
  } catch (e) {
    usage(`--out ${out}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const s = merged.summary;
  console.log(`merge: ${files.length} reports, ${merged.checks.length} checks (${s.pass} pass, ${s.fail} fail, ${s.vacuous} vacuous, ${s.error} error, ${s.skip} skip) -> ${out}`);
  return 0;
}

function timings(args: string[]): number {
  if (args.length !== 1) usage(`timings expects one report file, got ${args.length}`);
  const r = readReportFile(args[0]!);
  if (r.partial === true) usage(`${args[0]} is the partial report of an interrupted run: its times are not a run's`);
  const base = loadTimes();
  if (Object.keys(base.ms).length > 0 && base.profile !== r.run.profile) usage(`${args[0]} is a --profile ${r.run.profile} run; the table holds ${base.profile} times`);
  // Merged into the table: a filtered or sharded run refreshes its own checks and keeps the rest.
  const table = mergeTimes(base, timesFromReport(r.checks, r.run.profile));
  writeFileSync(CHECK_TIMES, formatTimes(table));
  console.log(`timings: ${r.checks.length} checks from ${args[0]} merged -> ${CHECK_TIMES} (${Object.keys(table.ms).length} checks)`);
  return 0;
}

/** junit and markdown: one report in, one document out (README#kernel-repositories). */
function ciFormat(name: "junit" | "markdown", argv: string[]): number {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { out: { type: "string" } }, allowPositionals: true });
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  if (parsed.positionals.length !== 1) usage(`${name} expects one report file, got ${parsed.positionals.length}`);
  const src = parsed.positionals[0]!;
  const report = readReportFile(src);
  const text = name === "junit" ? junitXml(report) : markdownSummary(report);
  const stepSummary = environment().GITHUB_STEP_SUMMARY;
  const out = parsed.values.out ?? (name === "junit" ? src.replace(/\.json$/, "") + ".junit.xml" : stepSummary);
  if (out === undefined || out === "") {
    process.stdout.write(text);
    return 0;
  }
  try {
    mkdirSync(dirname(resolve(out)), { recursive: true });
    if (name === "markdown" && parsed.values.out === undefined) appendFileSync(out, text);
    else writeFileSync(out, text);
  } catch (e) {
    usage(`--out ${out}: ${e instanceof Error ? e.message : String(e)}`);
  }
  console.log(`${name}: ${out}`);
  return 0;
}

/** Runs a report command; returns its exit status (2 for usage errors, printed to stderr). */
export function runReportCommand(name: ReportCommand, args: string[]): number {
  try {
    switch (name) {
      case "diff": return diff(args);
      case "html": return html(args);
      case "merge": return merge(args);
      case "timings": return timings(args);
      case "junit": case "markdown": return ciFormat(name, args);
    }
  } catch (e) {
    if (e instanceof UsageError || e instanceof ReportFileError || e instanceof MergeError) {
      console.error(`conformance ${name}: ${e.message}\n(see --help)`);
      return 2;
    }
    throw e;
  }
}
