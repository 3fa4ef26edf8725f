/**
 * The flash-attention comparison of the C5 checks (docs/spec/README.md, tolerance policy), per
 * tensor and sequence, and the check-level vacuity rule: a passing check in which some compared
 * tensor never carried a non-trivial reference value proves nothing about that tensor.
 */
import { abiOf } from "../../ffi/abi.ts";
import type { CaseOutcome, CheckResult } from "../../harness/check.ts";
import { biasVerdict } from "../../oracle/bias.ts";
import { flashRule, type Worst } from "../../oracle/compare.ts";
import { concat, maxAbs } from "../../src/numeric.ts";
import type { Precision } from "../../src/precision.ts";
import { usedParams } from "../../src/rules/level.ts";
import { stateNames } from "../../src/rules/state-grad.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { EXERCISED, floorRel } from "./tolerance.ts";

/** One tensor of one sequence: the kernel's values (undefined when it does not return them) and both references. */
export interface Compared {
  name: string;
  seq: number;
  kernel: ArrayLike<number> | undefined;
  ref64: ArrayLike<number>;
  ref32: ArrayLike<number>;
}

/** The first index where the kernel is not finite but the reference is, or -1. */
function firstNonFinite(kernel: ArrayLike<number>, ref: ArrayLike<number>): number {
  for (let i = 0; i < kernel.length; i++) if (!Number.isFinite(kernel[i]!) && Number.isFinite(ref[i]!)) return i;
  return -1;
}

/** A tensor's floor is at least this fraction of the floor of the largest tensor of its group in the case. */
const GROUP_FLOOR = 1e-3;

/** Gradients (names starting with d or "grad ") and outputs form the two groups of a case. */
function groupOf(name: string): "grad" | "out" {
  return /^d[A-Za-z]|^grad /.test(name) ? "grad" : "out";
}

function groupMax(items: Compared[], name: string): number {
  const g = groupOf(name);
  let m = 0;
  for (const it of items) if (groupOf(it.name) === g) m = Math.max(m, maxAbs(it.ref64));
  return m;
}

/** The floor of one item's bound: relative to its largest reference value, or its group's for tensors zero by the math. */
function floorOf(it: Compared, items: Compared[], p: Precision): number {
  // A tensor that is zero by the math (MEMORA's dk, dv at d = 1) has only roundoff in ref64, so a
  // floor relative to it would be ~1e-22 while a kernel's f32 sums leave ~1e-9: its floor is
  // taken relative to the case's largest tensor of the same kind (outputs, or gradients) instead,
  // scaled down by GROUP_FLOOR, as C9 does (docs/spec/precision.md#floors).
  return floorRel(p.accumulate) * Math.max(maxAbs(it.ref64), GROUP_FLOOR * groupMax(items, it.name));
}

/** Our kernels' precision, and what a kernel is judged as when it declares nothing else. */
export const F32_STORE_F64_ACC: Precision = { storage: "f32", state: "f32", accumulate: "f64" };

const sig = (x: number) => Number(x.toPrecision(4));

/**
 * The bias test (docs/spec/precision.md#bias) per tensor over every sequence of the case, and the
 * per-tensor measurements the report keeps: the largest error, the plain reference's error and the
 * bound (at the sequence closest to its bound), and the bias statistic.
 */
function biasAndDetails(items: Compared[], p: Precision): { failure?: string; details: Record<string, unknown> } {
  const tensors: Record<string, Record<string, number | boolean>> = {};
  let failure: string | undefined;
  for (const name of [...new Set(items.map((i) => i.name))]) {
    const mine = items.filter((i) => i.name === name && i.kernel !== undefined && i.kernel.length === i.ref64.length);
    if (mine.length === 0) continue;
    let err = 0, plain = 0, bound = 0, floor = 0, ratio = -1;
    for (const it of mine) {
      const f = floorOf(it, items, p);
      const k = flashRule(it.kernel!, it.ref64, it.ref32, f);
      const r = k.bound > 0 ? k.err / k.bound : k.err === 0 ? 0 : Infinity;
      if (r > ratio) {
        ratio = r;
        err = k.err;
        plain = k.errRef;
        bound = k.bound;
        floor = f;
      }
    }
    const ref64 = concat(mine.map((i) => i.ref64));
    const v = biasVerdict(concat(mine.map((i) => i.kernel!)), ref64, concat(mine.map((i) => i.ref32)), p.storage);
    tensors[name] = {
      err: sig(err), plain: sig(plain), floor: sig(floor), bound: sig(bound), slope: sig(v.slope), sigma: sig(v.sigma), plainTerm: sig(v.plainTerm),
      threshold: sig(v.threshold), bias: !v.ok,
    };
    // a bias on values that never left the vacuity floor is no evidence
    if (!v.ok && failure === undefined && maxAbs(ref64) > EXERCISED) {
      failure = `${name}: systematic bias, slope of (kernel - ref64) on ref64 = ${v.slope.toExponential(3)} (${(Math.abs(v.slope) / v.sigma).toFixed(1)} standard errors) ` +
        `exceeds max(${v.k}σ = ${(v.k * v.sigma).toExponential(2)}, 2‖plain − ref64‖/‖ref64‖ = ${v.plainTerm.toExponential(2)}, ${p.storage} floor ${v.floor}) ` +
        `(docs/spec/precision.md#bias)`;
    }
  }
  return { failure, details: { precision: { ...p }, tensors } };
}

/**
 * Applies the flash-attention bound and the bias test to every item (the plain reference in ref32
 * run at the kernel's declared precision); records which tensors were exercised.
 */
export function flashCompare(items: Compared[], exercised: Set<string>, who: string, precision: Precision = F32_STORE_F64_ACC): CaseOutcome {
  let worst: Worst | undefined;
  let worstRatio = -1;
  let failure: string | undefined;
  let anyLive = false;
  for (const it of items) {
    const where = `${it.name} (sequence ${it.seq})`;
    if (it.kernel === undefined) {
      failure ??= `${who} does not return ${it.name}, which the reference computes`;
      continue;
    }
    if (it.kernel.length !== it.ref64.length) {
      failure ??= `${where}: kernel gave ${it.kernel.length} values, reference ${it.ref64.length}`;
      continue;
    }
    const bad = firstNonFinite(it.kernel, it.ref64);
    if (bad >= 0) {
      failure ??= `${where}[${bad}] is ${it.kernel[bad]} where the reference is ${it.ref64[bad]}` +
        (Number.isNaN(it.kernel[bad]!) ? " — outputs are NaN-filled before every call: the kernel did not write this element" : "");
      continue;
    }
    const mag = maxAbs(it.ref64);
    if (mag > EXERCISED) {
      exercised.add(it.name);
      anyLive = true;
    }
    const floor = floorOf(it, items, precision);
    const k = flashRule(it.kernel, it.ref64, it.ref32, floor);
    const ratio = k.bound > 0 ? k.err / k.bound : k.err === 0 ? 0 : Infinity;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      const ref = it.ref64[k.at]!;
      worst = { abs: k.err, rel: k.err / Math.max(Math.abs(ref), 1e-300), tensor: `${it.name}[seq ${it.seq}]`, index: k.at };
    }
    if (!k.ok && failure === undefined) {
      failure = `${where}: max |kernel - ref64| = ${k.err.toExponential(3)} at [${k.at}] (kernel ${it.kernel[k.at]}, ref64 ${it.ref64[k.at]}) ` +
        `> 2 x ${k.errRef.toExponential(3)} (plain ${precision.storage}/${precision.accumulate}-accumulate reference) + ${floor.toExponential(3)} (floor)`;
    }
  }
  const bias = biasAndDetails(items, precision);
  const details = bias.details;
  if (failure !== undefined) return { ok: false, worst, message: failure, details };
  if (!anyLive) return { ok: false, vacuous: true, worst, message: `every compared reference value is below ${EXERCISED}`, details };
  if (bias.failure !== undefined) return { ok: false, worst, message: `${who}: ${bias.failure}`, details };
  return { ok: true, worst, details };
}

/** The names flashCompare gives the tensors of a check of this kind (what `coverage` expects to see exercised). */
export function expectedTensors(kind: "forward" | "backward" | "tape-e2e", decl: RuleDecl, frozen: boolean): string[] {
  switch (kind) {
    case "forward":
      return frozen ? ["y"] : ["y", ...stateNames(decl).map((n) => `state ${n}`)];
    case "backward":
      // a frozen read's S (Titans, Atlas) has a zero gradient by the math: only M is expected to be exercised
      return frozen ? ["dq", `d${stateNames(decl)[0]}`] : [...(abiOf(decl.key)?.grads ?? []), ...stateNames(decl).map((n) => `d${n}_0`)];
    case "tape-e2e":
      return ["y", "grad X", ...usedParams(decl).map((n) => `grad ${n}`)];
  }
}

/** A passing check in which some compared tensor never carried a non-trivial reference value is vacuous. */
export function coverage(r: CheckResult, expected: string[], exercised: Set<string>): CheckResult {
  if (r.status !== "pass") return r;
  const never = expected.filter((n) => !exercised.has(n));
  if (never.length === 0) return r;
  return { ...r, status: "vacuous", message: `never exercised in ${r.runs} cases (|ref64| <= ${EXERCISED} throughout): ${never.join(", ")}` };
}
