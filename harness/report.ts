/**
 * The nlc-report/1 JSON report: assembled from check results, validated against the checked-in
 * schema BEFORE it is written, and written atomically (temp file + rename).
 */
import { fileValidator } from "../cases/schema-validator.ts";
import { summarizePower, type PowerSummary } from "./report-power.ts";
import { execSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { cpus, platform, release } from "node:os";
import { dirname, join } from "node:path";
import type { BackendInfo } from "../ffi/backends.ts";
import type { CheckResult, Profile, Status } from "./check.ts";
import type { Shard } from "./shard.ts";

export type { BackendInfo };

import { ROOT } from "../paths.ts";

export const DEFAULT_REPORT = join(ROOT, "reports", "conformance.json");
const SCHEMA = join(ROOT, "reports", "schema", "nlc-report.schema.json");


/** The rule variants a kernel backend does not implement, and how many of the selected checks that left out (docs/spec/conformance.md#undeclared). */
export interface Unimplemented {
  /** Rule keys, `.frozen` for a frozen variant, in catalogue order. */
  variants: string[];
  checks: number;
}

/** A backend of the run as the report lists it: its probe, and what of the selection it does not implement. */
export type ReportBackend = BackendInfo & { unimplemented?: Unimplemented };

interface RunInfo {
  started: string;
  ended: string;
  version: string;
  revision: string | null;
  runtime: string;
  os: string;
  cpu: string;
  seed: number;
  profile: Profile;
  filter: string | null;
  backends: ReportBackend[];
  /** Set when this run was one shard of the selection (`--shard i/n`, NLC_SHARD). */
  shard?: Shard;
  /** How many checks the run selected (a partial report holds fewer). */
  planned?: number;
  /** What went wrong in the run without changing a verdict, one line each (a worker lane that failed, its checks run on the main thread); absent when nothing did. */
  warnings?: string[];
}

/** The count per status and, when kernel checks recorded a detection power, the run's power summary. */
type Summary = Record<Status, number> & { power?: PowerSummary };

export interface Report {
  format: "nlc-report/1";
  /** Set on the report of an interrupted run (written beside the complete one, never over it). */
  partial?: true;
  run: RunInfo;
  summary: Summary;
  checks: CheckResult[];
}

export function summarize(checks: readonly CheckResult[], minPower?: number | null): Summary {
  const s: Summary = { pass: 0, fail: 0, vacuous: 0, skip: 0, error: 0 };
  for (const c of checks) s[c.status]++;
  const power = summarizePower(checks, minPower);
  if (power !== undefined) s.power = power;
  return s;
}

/**
 * The closing line CI reads: "conformance: N passed, M failed" stays a prefix (M counts fail,
 * vacuous and error), followed by the breakdown of M and the skips. An interrupted run's line says
 * so, and the checks it did not run count as failed, so no reader of the prefix takes it for green
 * (docs/spec/conformance.md#partial-report).
 */
export function closingLine(s: Summary, notRun?: number): string {
  const bad = s.fail + s.vacuous + s.error + (notRun ?? 0);
  const partial = notRun === undefined ? "" : `, ${notRun} not run: partial, the run was interrupted`;
  return `conformance: ${s.pass} passed, ${bad} failed (${s.fail} fail, ${s.vacuous} vacuous, ${s.error} error, ${s.skip} skipped${partial})`;
}

/** The checks a partial report did not run (its planned count less what it holds), else undefined. */
export function notRunOf(r: Pick<Report, "partial" | "run" | "checks">): number | undefined {
  if (r.partial !== true) return undefined;
  return Math.max(1, (r.run.planned ?? r.checks.length + 1) - r.checks.length);
}

/**
 * Whether a report is green: complete, nothing failed, vacuous or errored, and something ran (a
 * check passed; every check skipped is green only with `allowSkipped`, --allow-skipped).
 */
export function isGreen(r: Pick<Report, "partial" | "summary" | "checks">, allowSkipped = false): boolean {
  const s = r.summary;
  return r.partial !== true && r.checks.length > 0 && s.fail + s.vacuous + s.error === 0 && (allowSkipped || s.pass > 0);
}

/** Where the report of a run that did not pass goes when a report that passed is at `path`: beside it, `<name>.failed.json`. */
export const failedPath = (path: string): string => (path.endsWith(".json") ? `${path.slice(0, -5)}.failed.json` : `${path}.failed.json`);

/** A run that produced no report at all (install, typecheck or build failed): one error. */
export const NO_REPORT_LINE = closingLine({ pass: 0, fail: 0, vacuous: 0, skip: 0, error: 1 });

/** The revision of the repository the run was started in (a kernel repository's, or this one's). */
function revision(): string | null {
  try {
    return execSync("git rev-parse HEAD", { cwd: process.cwd(), stdio: ["ignore", "pipe", "ignore"] }).toString().trim() || null;
  } catch {
    return null;
  }
}

export function runInfo(started: Date, seed: number, profile: Profile, filter: string | null, backends: ReportBackend[], shard?: Shard, planned?: number): RunInfo {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  return {
    started: started.toISOString(),
    ended: new Date().toISOString(),
    version: pkg.version,
    revision: revision(),
    runtime: `bun ${Bun.version}`,
    os: `${platform()} ${release()}`,
    cpu: `${cpus()[0]?.model ?? "unknown"} x${cpus().length}`,
    seed,
    profile,
    filter,
    backends,
    ...(shard !== undefined ? { shard } : {}),
    ...(planned !== undefined ? { planned } : {}),
  };
}

let validator: ((data: unknown) => boolean) & { errors?: unknown } | undefined;

/** Throws naming the first schema violation (JSON path and message). */
export function validateReport(report: unknown): void {
  if (validator === undefined) {
    validator = fileValidator(SCHEMA, { allErrors: true, strict: true, validateFormats: false }).validate;
  }
  if (!validator(report)) {
    const errs = (validator.errors ?? []) as { instancePath: string; message?: string }[];
    const first = errs.slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message ?? ""}`).join("; ");
    throw new Error(`report does not match ${SCHEMA}: ${first}`);
  }
}

/** A report file that cannot be used (missing, not JSON, not nlc-report/1): a usage error naming the file. */
export class ReportFileError extends Error {}

/** Reads and validates a report file; throws ReportFileError naming the file and what is wrong. */
export function readReportFile(path: string): Report {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new ReportFileError(`${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    validateReport(data);
  } catch (e) {
    throw new ReportFileError(`${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return data as Report;
}

/** JSON cannot hold Infinity/NaN: they are written as null. */
function jsonSafe(report: Report): string {
  return JSON.stringify(report, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2);
}

export function writeReport(report: Report, path = DEFAULT_REPORT): void {
  const text = jsonSafe(report);
  validateReport(JSON.parse(text));
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, text + "\n");
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}
