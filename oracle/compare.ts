/**
 * Comparison of computed tensors against an oracle, with the suite's vacuity rule: a compared
 * tensor whose reference values are all (near) zero proves nothing and makes the comparison
 * vacuous (docs/spec/tolerances.md#vacuous).
 */
import type { Data } from "../src/tensor.ts";
import { KERNEL, TAPE } from "./precision-table.ts";

export interface Tolerance {
  readonly rtol: number;
  readonly atol: number;
  /** Why the bound is what it is, when it is not the policy default. */
  readonly reason?: string;
  /** "sum": atol + rtol·|ref| (default); "max": max(atol, rtol·|ref|), the README's ULP form. */
  readonly form?: "sum" | "max";
}

export interface Worst {
  abs: number;
  rel: number;
  tensor: string;
  index: number;
  /** The element in the kernel's batch, where the judge knows the layout: `(b=0, t=15, h=1, i=3)`. */
  at?: string;
}

/** The verdict on one case (a check's CaseOutcome). `vacuous` marks a comparison over (near-)zero values. */
export interface CaseVerdict {
  ok: boolean;
  vacuous?: boolean;
  worst?: Worst;
  message?: string;
  /** Measurements of the case the report keeps beside `worst` (e.g. C5's per-tensor bounds and bias statistics). */
  details?: Readonly<Record<string, unknown>>;
}

export interface Comparison {
  ok: boolean;
  vacuous: boolean;
  worst: Worst;
  message?: string;
  /** Measurements a report keeps beside the verdict (e.g. the finite-difference refinements of C2). */
  details?: Readonly<Record<string, unknown>>;
}

/** Policy defaults (docs/spec/README.md): tape vs hand-written, tape vs finite differences. */
export const TOL_ULP: Tolerance = { rtol: TAPE.handWritten.value.rtol, atol: TAPE.handWritten.value.atol, form: "max" };
export const TOL_FD: Tolerance = { rtol: TAPE.finiteDifferences.value.rtol, atol: TAPE.finiteDifferences.value.atol };

/** A tensor is non-vacuous when its largest reference magnitude is at least this multiple of atol. */
export const VACUITY_FACTOR = TAPE.vacuityFactor.value;

export function emptyWorst(): Worst {
  return { abs: 0, rel: 0, tensor: "", index: -1 };
}

/** Keeps the larger of two worst records (by tolerance-normalised error). */
export function worse(a: Worst, b: Worst): Worst {
  return b.abs > a.abs ? b : a;
}

/**
 * |actual − expected| <= atol + rtol·|expected| elementwise for every named pair. Vacuity: with
 * require "every" (default) any compared tensor whose reference is all below the floor makes the
 * comparison vacuous (it is named); with "some", only when all of them are (e.g. a fixture that
 * also lists gradients that are zero by construction).
 */
export function compareTensors(
  actual: Readonly<Record<string, ArrayLike<number>>>,
  expected: Readonly<Record<string, ArrayLike<number>>>,
  tol: Tolerance,
  floor = VACUITY_FACTOR * tol.atol,
  require: "every" | "some" = "every",
): Comparison {
  let worst = emptyWorst();
  let worstExcess = -Infinity;
  // The failure message describes the worst element, so it names the same tensor and index as `worst`.
  let worstText = "";
  let ok = true;
  const vacuousNames: string[] = [];
  for (const name of Object.keys(expected)) {
    const e = expected[name]!, a = actual[name];
    if (a === undefined) return { ok: false, vacuous: false, worst, message: `${name}: missing from the result` };
    if (a.length !== e.length) return { ok: false, vacuous: false, worst, message: `${name}: ${a.length} elements, expected ${e.length}` };
    let maxRef = 0;
    for (let i = 0; i < e.length; i++) {
      const ev = e[i]!, av = a[i]!;
      maxRef = Math.max(maxRef, Math.abs(ev));
      const abs = Math.abs(av - ev);
      const bound = tol.form === "max" ? Math.max(tol.atol, tol.rtol * Math.abs(ev)) : tol.atol + tol.rtol * Math.abs(ev);
      const bad = !(abs <= bound); // NaN fails
      const excess = Number.isNaN(abs) ? Infinity : abs / bound;
      if (excess > worstExcess) {
        worstExcess = excess;
        worst = { abs: Number.isNaN(abs) ? Infinity : abs, rel: abs / Math.max(Math.abs(ev), 1e-300), tensor: name, index: i };
        if (bad) worstText = `${name}[${i}]: got ${av}, expected ${ev} (|diff| ${abs.toExponential(3)} > ${bound.toExponential(3)})`;
      }
      if (bad) ok = false;
    }
    if (maxRef < floor) vacuousNames.push(`${name} (max |ref| ${maxRef.toExponential(2)})`);
  }
  if (!ok) return { ok, vacuous: false, worst, message: worstText };
  const names = Object.keys(expected);
  if (require === "every" ? vacuousNames.length > 0 : vacuousNames.length === names.length) {
    return { ok: false, vacuous: true, worst, message: `near-zero reference, comparison proves nothing: ${vacuousNames.join(", ")}` };
  }
  return { ok: true, vacuous: false, worst };
}

/**
 * Bitwise equality of two arrays: the first index where they differ, or -1. NaN is never equal,
 * unless `nanEqual` (two runs of one computation, where NaN at the same index is the same result).
 */
export function bitwiseEqual(a: Data | ArrayLike<number>, b: Data | ArrayLike<number>, nanEqual = false): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (nanEqual && Number.isNaN(x) && Number.isNaN(y)) continue;
    if (!(x === y) || (x === 0 && 1 / x !== 1 / y)) return i;
  }
  return -1;
}

export interface FlashResult {
  /** max |candidate − ref64| and where. */
  err: number;
  at: number;
  /** max |ref32 − ref64|: the error of a plain f32 run. */
  errRef: number;
  bound: number;
  ok: boolean;
}

/**
 * The flash-attention rule (docs/spec/precision.md#flash) for one tensor: the candidate's max
 * error against the f64 reference is at most twice a plain f32 reference's, plus `floor` (the
 * rounding-noise allowance each caller states with its reason). NaN never passes, in either run.
 */
export function flashRule(candidate: ArrayLike<number>, ref64: ArrayLike<number>, ref32: ArrayLike<number>, floor: number): FlashResult {
  let err = 0, at = 0, errRef = 0;
  for (let i = 0; i < ref64.length; i++) {
    const e = Math.abs(candidate[i]! - ref64[i]!);
    if (!(e <= err)) {
      err = Number.isNaN(e) ? Infinity : e;
      at = i;
    }
    const r = Math.abs(ref32[i]! - ref64[i]!);
    errRef = Number.isNaN(r) ? Infinity : Math.max(errRef, r);
  }
  const bound = KERNEL.boundFactor.value * errRef + floor;
  // A non-finite f32 reference makes the bound meaningless: that is a failure, not a free pass.
  return { err, at, errRef, bound, ok: Number.isFinite(errRef) && err <= bound };
}

/**
 * The finite-difference analogue of a kernel tensor's detection power (docs/spec/precision.md#power-fd):
 * the smallest relative scale error ε at which `actual + s·ε·expected` leaves the tolerance at some
 * element, for the larger of the two signs s = ±1 (null: no scale error would). Per element i with
 * d_i = actual_i − expected_i and bound b_i, the crossing is (b_i − s·sgn(expected_i)·d_i) / |expected_i|.
 */
export function tolerancePower(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance): number | null {
  let plus = Infinity, minus = Infinity;
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]!, a = Math.abs(e);
    if (!(a > 0)) continue;
    const b = tol.form === "max" ? Math.max(tol.atol, tol.rtol * a) : tol.atol + tol.rtol * a;
    const d = (actual[i]! - e) * Math.sign(e);
    plus = Math.min(plus, (b - d) / a);
    minus = Math.min(minus, (b + d) / a);
  }
  const p = Math.max(plus, minus, 0);
  return Number.isFinite(p) ? p : null;
}

/** Per-tensor powers as a check's `details.power` (every tensor compared is a gradient; `by` is the bound: the tolerance). */
export function powerDetails(powers: Readonly<Record<string, number | null>>): Record<string, unknown> | undefined {
  const names = Object.keys(powers);
  if (names.length === 0) return undefined;
  const key = (p: number | null) => (p === null ? Infinity : p);
  const weakest = names.reduce((w, n) => (key(powers[n]!) > key(powers[w]!) ? n : w), names[0]!);
  const sig = (x: number | null) => (x === null ? null : Number(x.toPrecision(3)));
  const one = { power: sig(powers[weakest]!), tensor: weakest, by: "bound" };
  return {
    power: {
      ...one, gradient: one,
      tensors: Object.fromEntries(names.map((n) => [n, { power: sig(powers[n]!), by: "bound", bound: sig(powers[n]!), bias: null }])),
    },
  };
}
