/**
 * Central finite differences in f64. Tensors are perturbed in place and restored bit-exactly,
 * so `loss` must read the given tensors on every call (no caching).
 */
import type { Tensor } from "../src/tensor.ts";

/** The spec's step for f64 central differences (README tolerance policy: eps about 1e-6). */
export const FD_EPS = 1e-6;

/** Full gradient of a scalar function w.r.t. every element of `t`. */
export function fdGradient(loss: () => number, t: Tensor, eps = FD_EPS): Float64Array {
  if (t.dtype !== "f64") throw new Error("finite differences run in f64 only");
  const g = new Float64Array(t.size);
  const d = t.data;
  for (let i = 0; i < d.length; i++) {
    const x0 = d[i]!;
    d[i] = x0 + eps;
    const fp = loss();
    d[i] = x0 - eps;
    const fm = loss();
    d[i] = x0;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

/**
 * Directional derivative along u (one direction per tensor, all perturbed together):
 * (f(x + eps·u) − f(x − eps·u)) / 2eps, the v^T J u of fast gradcheck with v folded into the loss.
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
  shift(eps);
  const fp = loss();
  shift(-eps);
  const fm = loss();
  ts.forEach((t, k) => t.data.set(saved[k]!));
  return (fp - fm) / (2 * eps);
}
