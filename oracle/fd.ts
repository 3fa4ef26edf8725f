/**
 * Central finite differences in f64, with one Richardson step: D(h) = (f(x+h) − f(x−h)) / 2h has
 * error c·h² + O(h⁴), so (4·D(h/2) − D(h)) / 3 removes the h² term. Strongly curved rules (a sharp
 * tanh sign, an L_q normalisation) otherwise leave a truncation error near rtol at h = 1e-6.
 * Tensors are perturbed in place and restored bit-exactly, so `loss` must read the given tensors
 * on every call (no caching).
 *
 * The h² model fails when the function changes character inside the stencil (an L_q normalisation
 * of a near-zero matrix, a smoothed kink): then the estimate at (h, h/2) is off by more than the
 * tolerance. `refineDerivative` detects that by a second Richardson estimate at (h/2, h/4) and falls
 * back to halved steps until two successive estimates agree (docs/spec/tolerances.md#fd-refinement).
 */
import type { Tensor } from "../src/tensor.ts";

/**
 * The larger of the two steps (the smaller is half of it). The README asks for central steps of
 * about 1e-6; with the Richardson step the rounding noise is amplified about 3x, so the pair
 * (1e-5, 5e-6) keeps that noise below atol for losses up to ~100 while the h⁴ truncation stays
 * negligible.
 */
export const FD_EPS = 1e-5;

/**
 * How many times the refinement halves the step at most: FD_EPS·2⁻¹⁴ ≈ 6e-10, where the rounding
 * noise of a difference (~1e-16·|L|/h ≈ 2e-7·|L|) is still below rtol for gradients of |L|'s
 * order. Seven halvings (8e-8) were one too few for Moneta at q = 2.33 from W2 = 0: the estimates
 * settled at 3.9e-8.
 */
export const FD_MAX_HALVINGS = 14;

function richardson(central: (h: number) => number, eps: number): number {
  return (4 * central(eps / 2) - central(eps)) / 3;
}

/** The central difference of `loss` in element i of `t` (perturbed in place, restored bit-exactly). */
function centralAt(loss: () => number, d: Float64Array, i: number): (h: number) => number {
  const x0 = d[i]!;
  return (h) => {
    d[i] = x0 + h;
    const fp = loss();
    d[i] = x0 - h;
    const fm = loss();
    d[i] = x0;
    return (fp - fm) / (2 * h);
  };
}

/** Full gradient of a scalar function w.r.t. every element of `t`. */
export function fdGradient(loss: () => number, t: Tensor, eps = FD_EPS): Float64Array {
  if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
  const g = new Float64Array(t.size);
  const d = t.data as Float64Array;
  for (let i = 0; i < d.length; i++) g[i] = richardson(centralAt(loss, d, i), eps);
  return g;
}

/** The result of refining one finite-difference estimate (docs/spec/tolerances.md#fd-refinement). */
export interface RefinedDerivative {
  /** The estimate at the last step pair tried: the settled one, or the one with the smallest spread. */
  readonly value: number;
  /** The larger step of the pair `value` was taken at. */
  readonly step: number;
  /** |R(step) − R(step/2)|: how much two successive Richardson estimates disagree there. */
  readonly spread: number;
  /** Whether two successive estimates agreed within the accepted spread. */
  readonly settled: boolean;
  /** The first estimate (at FD_EPS) and its spread: the trouble the refinement found. */
  readonly first: number;
  readonly firstSpread: number;
}

/**
 * Richardson estimates R(h), R(h/2), R(h/4), … (each from central differences at h and h/2) until
 * two successive ones agree within `accept(value)` (a fraction of the comparison's tolerance),
 * at most FD_MAX_HALVINGS halvings. Each estimate reuses the previous central difference, so a
 * settled first pair costs one central difference more than the plain estimate.
 */
export function refineDerivative(central: (h: number) => number, accept: (value: number) => number, eps = FD_EPS): RefinedDerivative {
  let h = eps;
  let dh = central(h), dh2 = central(h / 2);
  let r = (4 * dh2 - dh) / 3;
  const first = r;
  let firstSpread = NaN;
  let best: { value: number; step: number; spread: number } = { value: r, step: h, spread: Infinity };
  for (let k = 0; k < FD_MAX_HALVINGS; k++) {
    const dh4 = central(h / 4);
    const next = (4 * dh4 - dh2) / 3;
    const spread = Math.abs(next - r);
    if (k === 0) firstSpread = spread;
    if (spread <= accept(next)) return { value: next, step: h / 2, spread, settled: true, first, firstSpread };
    if (spread < best.spread) best = { value: next, step: h / 2, spread };
    h /= 2;
    dh = dh2;
    dh2 = dh4;
    r = next;
  }
  return { ...best, settled: false, first, firstSpread };
}

/** refineDerivative for element i of `t`. */
export function refineGradientAt(loss: () => number, t: Tensor, i: number, accept: (value: number) => number, eps = FD_EPS): RefinedDerivative {
  if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
  return refineDerivative(centralAt(loss, t.data as Float64Array, i), accept, eps);
}

/** The central difference along u (one direction per tensor, all perturbed together); restores the tensors after each call. */
function centralAlong(loss: () => number, ts: readonly Tensor[], us: readonly Float64Array[]): (h: number) => number {
  const saved = ts.map((t) => {
    if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
    return t.data.slice();
  });
  const shift = (c: number) => ts.forEach((t, k) => {
    const u = us[k]!, x0 = saved[k]!;
    for (let i = 0; i < t.size; i++) t.data[i] = x0[i]! + c * u[i]!;
  });
  return (h) => {
    shift(h);
    const fp = loss();
    shift(-h);
    const fm = loss();
    ts.forEach((t, k) => t.data.set(saved[k]!));
    return (fp - fm) / (2 * h);
  };
}

/**
 * Directional derivative along u (one direction per tensor, all perturbed together), the
 * v^T J u of fast gradcheck with v folded into the loss.
 */
export function fdDirectional(loss: () => number, ts: readonly Tensor[], us: readonly Float64Array[], eps = FD_EPS): number {
  return richardson(centralAlong(loss, ts, us), eps);
}

/** refineDerivative along u. */
export function refineDirectional(loss: () => number, ts: readonly Tensor[], us: readonly Float64Array[], accept: (value: number) => number, eps = FD_EPS): RefinedDerivative {
  return refineDerivative(centralAlong(loss, ts, us), accept, eps);
}

/** How the differences are taken, for the tolerance record of a report. */
export const FD_METHOD = {
  eps: FD_EPS,
  stencil: "central, one Richardson step (h, h/2); where the tape disagrees, refined by halving h until two Richardson estimates agree",
} as const;
