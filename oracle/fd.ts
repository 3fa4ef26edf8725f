/**
 * Central finite differences in f64, with one Richardson step: D(h) = (f(x+h) − f(x−h)) / 2h has
 * error c·h² + O(h⁴), so (4·D(h/2) − D(h)) / 3 removes the h² term. Strongly curved rules (a sharp
 * tanh sign, an L_q normalisation) otherwise leave a truncation error near rtol at h = 1e-6.
 * Tensors are perturbed in place and restored bit-exactly, so `loss` must read the given tensors
 * on every call (no caching).
 */
import type { Tensor } from "../src/tensor.ts";

/**
 * The larger of the two steps (the smaller is half of it). The README asks for central steps of
 * about 1e-6; with the Richardson step the rounding noise is amplified about 3x, so the pair
 * (1e-5, 5e-6) keeps that noise below atol for losses up to ~100 while the h⁴ truncation stays
 * negligible.
 */
export const FD_EPS = 1e-5;

function richardson(central: (h: number) => number, eps: number): number {
  return (4 * central(eps / 2) - central(eps)) / 3;
}

/** Full gradient of a scalar function w.r.t. every element of `t`. */
export function fdGradient(loss: () => number, t: Tensor, eps = FD_EPS): Float64Array {
  if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
  const g = new Float64Array(t.size);
  const d = t.data;
  for (let i = 0; i < d.length; i++) {
    const x0 = d[i]!;
    g[i] = richardson((h) => {
      d[i] = x0 + h;
      const fp = loss();
      d[i] = x0 - h;
      const fm = loss();
      d[i] = x0;
      return (fp - fm) / (2 * h);
    }, eps);
  }
  return g;
}

/**
 * Directional derivative along u (one direction per tensor, all perturbed together), the
 * v^T J u of fast gradcheck with v folded into the loss.
 */
export function fdDirectional(loss: () => number, ts: readonly Tensor[], us: readonly Float64Array[], eps = FD_EPS): number {
  const saved = ts.map((t) => {
    if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
    return t.data.slice();
  });
  const shift = (c: number) => ts.forEach((t, k) => {
    const u = us[k]!, x0 = saved[k]!;
    for (let i = 0; i < t.size; i++) t.data[i] = x0[i]! + c * u[i]!;
  });
  const value = richardson((h) => {
    shift(h);
    const fp = loss();
    shift(-h);
    const fm = loss();
    return (fp - fm) / (2 * h);
  }, eps);
  ts.forEach((t, k) => t.data.set(saved[k]!));
  return value;
}

/** How the differences are taken, for the tolerance record of a report. */
export const FD_METHOD = { eps: FD_EPS, stencil: "central, one Richardson step (h, h/2)" } as const;
