/**
 * Detection power in a run's results (docs/spec/precision.md#power): the --min-power gate on each
 * kernel check, the run's power summary (weakest check, median, histogram) and its blind-spot
 * count (docs/spec/conformance.md#signatures).
 */
import type { CheckResult } from "./check.ts";

/** The power a kernel check records (`details.power`, oracle/kernel-power.ts CheckPower). */
interface PowerDetails {
  power: number | null;
  tensor: string;
  by: string;
  gradient?: { power: number | null; tensor: string; by: string };
}

export function powerOf(r: Pick<CheckResult, "details">): PowerDetails | undefined {
  const p = r.details?.power as PowerDetails | undefined;
  return p !== undefined && typeof p === "object" && "tensor" in p ? p : undefined;
}

export function blindSpotsOf(r: Pick<CheckResult, "details">): string[] {
  const b = r.details?.blind_spots;
  return Array.isArray(b) ? (b as string[]) : [];
}

/** `--min-power` / NLC_MIN_POWER: `1%`, `0.01`, `1e-2`, or `off`; throws naming the setting on anything else. */
export function parseMinPower(v: string, name: string): number | null {
  const s = v.trim();
  if (s === "off" || s === "") return null;
  const pct = s.endsWith("%");
  const x = Number(pct ? s.slice(0, -1) : s);
  if (!Number.isFinite(x) || x <= 0) throw new Error(`${name} ${v}: expected a positive fraction (0.01), a percentage (1%) or off`);
  const p = pct ? x / 100 : x;
  if (p >= 1) throw new Error(`${name} ${v}: a relative scale error of 100% or more gates nothing (did you mean ${x}%?)`);
  return p;
}

/** The default gate: off (docs/spec/precision.md#min-power). */
export const DEFAULT_MIN_POWER: number | null = null;

/**
 * Whether a check judges an artefact (a kernel backend, `subject.backend`, or a fixture,
 * `subject.fixture`) rather than the reference itself: the power gate and summary cover these
 * (docs/spec/precision.md#min-power), whatever their class.
 */
function judgesArtefact(c: Pick<CheckResult, "subject">): boolean {
  return c.subject.backend !== undefined || c.subject.fixture !== undefined;
}

const pct = (x: number) => {
  const v = x * 100;
  return `${v >= 1e-3 ? Number(v.toPrecision(3)) : v.toExponential(2)}%`;
};

/**
 * The gate (docs/spec/precision.md#min-power): a passing check whose weakest gradient tensor could
 * not detect a `minPower` scale error fails, with a message naming the tensor, its power and the
 * test that gives it. Checks of an artefact only (`judgesArtefact`: a kernel backend's, a fixture's);
 * checks without gradients, and checks that did not pass, are left alone.
 */
export function gateMinPower(r: CheckResult, minPower: number | null | undefined): CheckResult {
  // checks of an artefact only: the finite-difference checks record their power, but a tape gradient is not a release artefact
  if (minPower === null || minPower === undefined || r.status !== "pass" || !judgesArtefact(r)) return r;
  const g = powerOf(r)?.gradient;
  if (g === undefined || (g.power !== null && g.power <= minPower)) return r;
  const what = g.power === null ? "detects no scale error at all" : `detects a scale error only from ${pct(g.power)} (the ${g.by === "bias" ? "bias test" : "bound"})`;
  return {
    ...r, status: "fail",
    message: `--min-power ${pct(minPower)}: the weakest gradient ${g.tensor} ${what}, so a ${pct(minPower)} scale error in it would have passed ` +
      `(docs/spec/precision.md#min-power)${r.message ? `; ${r.message}` : ""}`,
    details: { ...(r.details ?? {}), min_power: minPower },
  };
}

/** Upper edges of the power histogram's buckets. */
const EDGES = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1] as const;

export interface PowerSummary {
  /** Kernel checks that recorded a power. */
  checks: number;
  /** The weakest check (its weakest tensor). */
  weakest?: { id: string; power: number | null; tensor: string };
  /** The median of the checks' weakest-tensor powers (a check that detects nothing counts as the largest). */
  median?: number | null;
  /** Checks by their weakest-tensor power: "<=1e-6", ..., "<=1e-1", ">1e-1", "none". */
  histogram: Record<string, number>;
  /** Checks passing with a blind spot. */
  blind_spots: number;
  /** The run's --min-power, when set. */
  min_power?: number;
}

const label = (x: number) => x.toExponential(0);
/** The histogram's bucket names, in order. */
export const POWER_BUCKETS = [...EDGES.map((x) => `<=${label(x)}`), `>${label(EDGES[EDGES.length - 1]!)}`, "none"];

function bucket(p: number | null): string {
  if (p === null) return "none";
  const i = EDGES.findIndex((x) => p <= x);
  return POWER_BUCKETS[i < 0 ? EDGES.length : i]!;
}

/** The run's power summary over its checks of an artefact (`judgesArtefact`), or undefined when none recorded a power. */
export function summarizePower(checks: readonly CheckResult[], minPower?: number | null): PowerSummary | undefined {
  const kernel = checks.filter(judgesArtefact);
  const rows = kernel.map((c) => [c, powerOf(c)] as const).filter((x): x is readonly [CheckResult, PowerDetails] => x[1] !== undefined);
  const blind = kernel.filter((c) => c.status === "pass" && blindSpotsOf(c).length > 0).length;
  if (rows.length === 0 && blind === 0) return undefined;
  const histogram: Record<string, number> = {};
  for (const e of POWER_BUCKETS) histogram[e] = 0;
  for (const [, p] of rows) histogram[bucket(p.power)]!++;
  const key = (p: number | null) => (p === null ? Infinity : p);
  const sorted = [...rows].sort((a, b) => key(a[1].power) - key(b[1].power));
  const out: PowerSummary = { checks: rows.length, histogram, blind_spots: blind };
  if (sorted.length > 0) {
    const w = sorted[sorted.length - 1]!;
    out.weakest = { id: w[0].id, power: w[1].power, tensor: w[1].tensor };
    const m = sorted[Math.floor((sorted.length - 1) / 2)]![1].power;
    out.median = m;
  }
  if (minPower !== null && minPower !== undefined) out.min_power = minPower;
  return out;
}
