/**
 * The subcommands that work on finished reports (no check runs):
 *   diff OLD NEW                 what changed between two reports; exit 1 on a regression
 * Usage errors (a missing or invalid report file, wrong arguments) exit 2 and name the file.
 */
import { diffReports, formatDiff, isRegression } from "../harness/report-diff.ts";
import { readReportFile, ReportFileError } from "../harness/report.ts";

export const REPORT_COMMANDS = ["diff"] as const;
export type ReportCommand = (typeof REPORT_COMMANDS)[number];

export const REPORT_COMMANDS_HELP = `Report commands (they run no checks):
  diff OLD NEW     compare two reports: new failures, fixed checks, checks that disappeared
                   or appeared, and passing checks whose error-to-bound ratio grew over 10x;
                   exit 1 on a regression (a new failure, a disappeared check, such growth)`;

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

/** Runs a report command; returns its exit status (2 for usage errors, printed to stderr). */
export function runReportCommand(name: ReportCommand, args: string[]): number {
  try {
    switch (name) {
      case "diff": return diff(args);
    }
  } catch (e) {
    if (e instanceof UsageError || e instanceof ReportFileError) {
      console.error(`conformance ${name}: ${e.message}\n(see --help)`);
      return 2;
    }
    throw e;
  }
}
