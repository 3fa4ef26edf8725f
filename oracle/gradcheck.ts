/**
 * Gradients vs finite differences of a scalar loss (docs/spec/conformance.md#c2): the full Jacobian when the
 * inputs are few, otherwise random directions v^T J u (v folded into the loss), and on a
 * directional failure the full check, whose per-element result is what a user needs.
 *
 * An estimate the tape disagrees with is refined before it counts (docs/spec/tolerances.md#fd-refinement):
 * a second Richardson estimate at half the step tells whether the stencil is in trouble, and the
 * step is halved until two estimates agree. Only a settled estimate fails a case; every refinement
 * is listed in the comparison's details (`fd_refined`).
 */
import { Rng } from "../src/rng.ts";
import type { Tensor } from "../src/tensor.ts";
import { compareTensors, powerDetails, tolerancePower, TOL_FD, VACUITY_FACTOR, type Comparison, type Worst } from "./compare.ts";
import { fdDirectional, fdGradient, refineDirectional, refineGradientAt, type RefinedDerivative } from "./fd.ts";

export interface Differentiated {
  readonly name: string;
  /** The input the loss reads; it is perturbed in place and restored. */
  readonly tensor: Tensor;
  /** The gradient under test. */
  readonly grad: ArrayLike<number>;
}

export interface GradCheckOptions {
  /** Up to this many input elements the full Jacobian is checked. */
  readonly fullMax: number;
  readonly directions: number;
  /** Seed of the random directions. */
  readonly seed: number;
  /** Per-tensor vacuity floor on the gradients (0: the caller judges vacuity). */
  readonly floor?: number;
}

/** Two successive Richardson estimates agree when they differ by at most a quarter of the comparison's bound. */
const SETTLE_FRACTION = 0.25;

/** One refined estimate, as the report lists it. */
export interface FdRefinement {
  readonly at: string;
  /** The first estimate (at FD_EPS), the settled one, and the step it settled at. */
  readonly first: number;
  readonly refined: number;
  readonly step: number;
  /** |R(h) − R(h/2)| at FD_EPS: the disagreement that showed the trouble. */
  readonly first_spread: number;
  readonly settled: boolean;
}

function noteOf(at: string, r: RefinedDerivative): FdRefinement {
  return { at, first: r.first, refined: r.value, step: r.step, first_spread: r.firstSpread, settled: r.settled };
}

/** At most this many refinements are listed by element; the count is always given. */
const LISTED = 8;

function withRefinements(c: Comparison, notes: readonly FdRefinement[]): Comparison {
  if (notes.length === 0) return c;
  const unsettled = notes.filter((n) => !n.settled);
  const message = unsettled.length > 0 && !c.ok && !c.vacuous
    ? `${c.message ?? "check failed"}; finite differences did not settle at ${unsettled.length} element${unsettled.length === 1 ? "" : "s"} (first ${unsettled[0]!.at}: Richardson estimates still ${unsettled[0]!.first_spread.toExponential(2)} apart at FD_EPS)`
    : c.message;
  return { ...c, message, details: { ...c.details, fd_refined: notes.length, fd_refinements: notes.slice(0, LISTED) } };
}

function fullCheck(loss: () => number, ds: readonly Differentiated[], floor: number, notes: FdRefinement[]): Comparison {
  const got: Record<string, ArrayLike<number>> = {}, want: Record<string, Float64Array> = {};
  for (const d of ds) {
    got[d.name] = d.grad;
    const w = fdGradient(loss, d.tensor);
    // Where the tape is outside the bound, the estimate is refined before it counts.
    for (let i = 0; i < w.length; i++) {
      if (Math.abs(d.grad[i]! - w[i]!) <= elementBound(w[i]!)) continue;
      const r = refineGradientAt(loss, d.tensor, i, (v) => SETTLE_FRACTION * elementBound(v));
      notes.push(noteOf(`${d.name}[${i}]`, r));
      if (r.settled) w[i] = r.value;
    }
    want[d.name] = w;
  }
  const c = compareTensors(got, want, TOL_FD, floor);
  if (!c.ok) return withRefinements(c, notes);
  const powers = Object.fromEntries(ds.map((d) => [d.name, tolerancePower(got[d.name]!, want[d.name]!, TOL_FD)]));
  return withRefinements({ ...c, details: { ...c.details, ...powerDetails(powers) } }, notes);
}

function elementBound(ref: number): number {
  return TOL_FD.atol + TOL_FD.rtol * Math.abs(ref);
}

export function gradCheck(loss: () => number, ds: readonly Differentiated[], opts: GradCheckOptions): Comparison {
  const floor = opts.floor ?? VACUITY_FACTOR * TOL_FD.atol;
  const total = ds.reduce((s, d) => s + d.tensor.size, 0);
  const notes: FdRefinement[] = [];
  if (total <= opts.fullMax) return fullCheck(loss, ds, floor, notes);

  const rng = new Rng(opts.seed);
  let worst: Worst = { abs: 0, rel: 0, tensor: "direction", index: -1 };
  // per tensor, the smallest scale error any direction would have flagged, by sign (docs/spec/precision.md#power-fd)
  const byTensor = ds.map(() => [Infinity, Infinity]);
  for (let k = 0; k < opts.directions; k++) {
    const us = ds.map((d) => Float64Array.from({ length: d.tensor.size }, () => rng.uniform(-1, 1)));
    let a = 0, scale = 0;
    const part = ds.map(() => 0);
    ds.forEach((d, i) => {
      const u = us[i]!;
      for (let j = 0; j < u.length; j++) {
        a += d.grad[j]! * u[j]!;
        part[i]! += d.grad[j]! * u[j]!;
        scale += Math.abs(d.grad[j]! * u[j]!);
      }
    });
    let fd = fdDirectional(loss, ds.map((d) => d.tensor), us);
    // The bound scales with u: atol per element (in quadrature), rtol on the summed contributions.
    const bound = TOL_FD.atol * Math.sqrt(total) + TOL_FD.rtol * scale;
    if (!(Math.abs(a - fd) <= bound)) {
      const r = refineDirectional(loss, ds.map((d) => d.tensor), us, () => SETTLE_FRACTION * bound);
      notes.push(noteOf(`direction ${k}`, r));
      if (r.settled) fd = r.value;
    }
    const abs = Math.abs(a - fd);
    // tensor i scaled by 1 + s·ε moves v^T J u by s·ε·part_i (the rtol term's growth is second order in ε)
    part.forEach((pi, i) => {
      if (!(Math.abs(pi) > 0)) return;
      const dd = (a - fd) * Math.sign(pi);
      byTensor[i]![0] = Math.min(byTensor[i]![0]!, (bound - dd) / Math.abs(pi));
      byTensor[i]![1] = Math.min(byTensor[i]![1]!, (bound + dd) / Math.abs(pi));
    });
    const here: Worst = { abs, rel: abs / Math.max(Math.abs(fd), 1e-300), tensor: "direction", index: k };
    if (abs > worst.abs) worst = here;
    if (!(abs <= bound)) {
      const full = fullCheck(loss, ds, floor, notes);
      const msg = `direction ${k}: v^T J u = ${fd}, tape ${a} (|diff| ${abs.toExponential(3)} > ${bound.toExponential(3)})`;
      // `worst` is the failing direction the message names, not an earlier larger (passing) one.
      return full.ok ? withRefinements({ ok: false, vacuous: false, worst: here, message: `${msg}; full Jacobian check passed` }, notes) : full;
    }
  }
  const flat: string[] = [];
  for (const d of ds) {
    let m = 0;
    for (let i = 0; i < d.grad.length; i++) m = Math.max(m, Math.abs(d.grad[i]!));
    if (m < floor) flat.push(`${d.name} (max |grad| ${m.toExponential(2)})`);
  }
  if (flat.length > 0) return withRefinements({ ok: false, vacuous: true, worst, message: `near-zero gradients: ${flat.join(", ")}` }, notes);
  const powers = Object.fromEntries(ds.map((d, i) => {
    const p = Math.max(byTensor[i]![0]!, byTensor[i]![1]!, 0);
    return [d.name, Number.isFinite(p) ? p : null];
  }));
  return withRefinements({ ok: true, vacuous: false, worst, details: powerDetails(powers) }, notes);
}
