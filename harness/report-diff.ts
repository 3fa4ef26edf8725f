/**
 * `report diff OLD NEW`: what changed between two reports (e.g. the previous release's and this
 * one's): new failures, fixed checks, checks that disappeared or appeared, and the drift of each
 * passing check's error-to-bound ratio.
 */
import type { CheckResult, Status } from "./check.ts";
import type { Report } from "./report.ts";

/** A passing check whose error-to-bound ratio grew by more than this factor is flagged. */
const DRIFT_FACTOR = 10;

const BAD: ReadonlySet<Status> = new Set(["fail", "vacuous", "error"]);

interface Drift {
  id: string;
  /** What the ratio measures: the error over the check's bound, or (no numeric bound) the bare error. */
  measure: "error/bound" | "error";
  old: number;
  new: number;
  growth: number;
}

interface ReportDiff {
  /** Bad in NEW, and pass/skip in OLD or absent from it. */
  newFailures: { id: string; was: Status | null; now: Status; message?: string }[];
  /** Bad in OLD, pass in NEW. */
  fixed: { id: string; was: Status }[];
  /** Bad in both. */
  stillFailing: { id: string; now: Status }[];
  disappeared: { id: string; was: Status }[];
  appeared: { id: string; now: Status }[];
  /** Passing in both, ratio known in both, grown by more than DRIFT_FACTOR. */
  drift: Drift[];
  /** How many checks passed in both with a ratio known in both (how much the drift test covered). */
  driftCompared: number;
}

/**
 * The worst error over the bound the check's tolerance gives at that element, where the tolerance
 * is numeric ({rtol, atol[, form]}, the f64 record of a fixture tolerance, or a relative `rel`);
 * null where it is not (bitwise, exact, the flash rule's measured bound).
 */
export function errorToBound(c: CheckResult): number | null {
  const w = c.worst;
  if (w === undefined || w.abs === null || !Number.isFinite(w.abs)) return null;
  const t = c.tolerance as Record<string, unknown>;
  const rec = (typeof t.rtol === "number" && typeof t.atol === "number" ? t : t.f64) as Record<string, unknown> | undefined;
  if (rec !== undefined && typeof rec.rtol === "number" && typeof rec.atol === "number") {
    const ref = w.rel !== null && w.rel > 0 ? w.abs / w.rel : 0;
    const bound = rec.form === "max" ? Math.max(rec.atol, rec.rtol * ref) : rec.atol + rec.rtol * ref;
    return bound > 0 ? w.abs / bound : null;
  }
  if (typeof t.rel === "number" && t.rel > 0 && w.rel !== null && Number.isFinite(w.rel)) return w.rel / t.rel;
  return null;
}

function driftOf(a: CheckResult, b: CheckResult): Drift | null {
  const ra = errorToBound(a), rb = errorToBound(b);
  if (ra !== null && rb !== null) return { id: a.id, measure: "error/bound", old: ra, new: rb, growth: ra > 0 ? rb / ra : rb > 0 ? Infinity : 1 };
  const ea = a.worst?.abs, eb = b.worst?.abs;
  if (typeof ea === "number" && typeof eb === "number" && Number.isFinite(ea) && Number.isFinite(eb)) {
    return { id: a.id, measure: "error", old: ea, new: eb, growth: ea > 0 ? eb / ea : eb > 0 ? Infinity : 1 };
  }
  return null;
}

export function diffReports(oldR: Report, newR: Report): ReportDiff {
  const before = new Map(oldR.checks.map((c) => [c.id, c]));
  const after = new Map(newR.checks.map((c) => [c.id, c]));
  const d: ReportDiff = { newFailures: [], fixed: [], stillFailing: [], disappeared: [], appeared: [], drift: [], driftCompared: 0 };
  for (const [id, a] of before) if (!after.has(id)) d.disappeared.push({ id, was: a.status });
  for (const [id, b] of after) {
    const a = before.get(id);
    if (a === undefined) d.appeared.push({ id, now: b.status });
    if (BAD.has(b.status)) {
      if (a !== undefined && BAD.has(a.status)) d.stillFailing.push({ id, now: b.status });
      else d.newFailures.push({ id, was: a?.status ?? null, now: b.status, ...(b.message !== undefined ? { message: b.message } : {}) });
    } else if (a !== undefined && BAD.has(a.status) && b.status === "pass") {
      d.fixed.push({ id, was: a.status });
    } else if (a !== undefined && a.status === "pass" && b.status === "pass") {
      const dr = driftOf(a, b);
      if (dr !== null) {
        d.driftCompared++;
        if (dr.growth > DRIFT_FACTOR) d.drift.push(dr);
      }
    }
  }
  d.drift.sort((x, y) => y.growth - x.growth);
  return d;
}

/** A regression: a new failure, a check that disappeared, or an error that grew past the drift factor. */
export function isRegression(d: ReportDiff): boolean {
  return d.newFailures.length > 0 || d.disappeared.length > 0 || d.drift.length > 0;
}

export function formatDiff(d: ReportDiff, oldName: string, newName: string): string {
  const out: string[] = [`report diff: ${oldName} -> ${newName}`];
  const section = <T>(title: string, rows: T[], line: (r: T) => string) => {
    out.push(`${title}: ${rows.length}`);
    for (const r of rows) out.push(`  ${line(r)}`);
  };
  section("new failures", d.newFailures, (r) => `${r.id}: ${r.was ?? "absent"} -> ${r.now}${r.message ? ` (${r.message})` : ""}`);
  section("fixed", d.fixed, (r) => `${r.id}: ${r.was} -> pass`);
  section("still failing", d.stillFailing, (r) => `${r.id}: ${r.now}`);
  section("disappeared", d.disappeared, (r) => `${r.id} (was ${r.was})`);
  section("appeared", d.appeared, (r) => `${r.id} (${r.now})`);
  section(`drift over ${DRIFT_FACTOR}x (of ${d.driftCompared} passing checks compared)`, d.drift,
    (r) => `${r.id}: ${r.measure} ${r.old.toExponential(2)} -> ${r.new.toExponential(2)} (x${Number.isFinite(r.growth) ? r.growth.toFixed(1) : "inf"})`);
  out.push(isRegression(d) ? "report diff: regression" : "report diff: no regression");
  return out.join("\n");
}
