/**
 * The subcommands that work on finished reports (no check runs):
 *   diff OLD NEW                 what changed between two reports; exit 1 on a regression
 *   html REPORT [--out FILE]     one static HTML page: the status matrix with click-through
 * Usage errors (a missing or invalid report file, wrong arguments) exit 2 and name the file.
 */
import { diffReports, formatDiff, isRegression } from "../harness/report-diff.ts";
import { readReportFile, ReportFileError } from "../harness/report.ts";
import { reportHtml } from "../harness/report-html.ts";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parseArgs } from "node:util";

export const REPORT_COMMANDS = ["diff", "html"] as const;
export type ReportCommand = (typeof REPORT_COMMANDS)[number];

export const REPORT_COMMANDS_HELP = `Report commands (they run no checks):
  diff OLD NEW     compare two reports: new failures, fixed checks, checks that disappeared
                   or appeared, and passing checks whose error-to-bound ratio grew over 10x;
                   exit 1 on a regression (a new failure, a disappeared check, such growth)
  html REPORT [--out FILE]
                   write one static HTML page (default: REPORT with .html): a matrix of
                   rule x variant by k x backend x dtype coloured by status, each cell
                   listing its checks (message, worst error, tolerance, replay command)`;

class UsageError extends Error {}

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

/** Runs a report command; returns its exit status (2 for usage errors, printed to stderr). */
export function runReportCommand(name: ReportCommand, args: string[]): number {
  try {
    switch (name) {
      case "diff": return diff(args);
      case "html": return html(args);
    }
  } catch (e) {
    if (e instanceof UsageError || e instanceof ReportFileError) {
      console.error(`conformance ${name}: ${e.message}\n(see --help)`);
      return 2;
    }
    throw e;
  }
}
