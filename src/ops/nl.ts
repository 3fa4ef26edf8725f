/** The Nested-Learning specific ops: Trellis' normalised SiLU and MEMORA's KL retention. */
import * as K from "../numeric.ts";
import { accStep } from "../precision.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { dim, need, sameShapes, rowsCols } from "./op-checks.ts";

const NSILU_EPS = 1e-8;

/** ‖silu(u[o..o+n))‖, the sum of squares accumulated as every rule accumulates. */
function siluNorm(u: Data, o: number, n: number): number {
  let ss = 0;
  for (let j = 0; j < n; j++) {
    const s = K.silu(u[o + j]!);
    ss = accStep(ss + s * s);
  }
  return Math.sqrt(ss);
}

/**
 * Trellis' normalised SiLU per row of length n: sqrt(n) · silu(u) / ||silu(u)||, and the zero
 * vector when ||silu(u)|| <= 1e-8 (docs/spec/miras-compression.md#trellis-nsilu). The seed's op has no sqrt(n)
 * factor; we follow the rule that uses it, so the op and Trellis agree.
 */
export function nsiluRow(u: Data, o: number, n: number, out: Data): void {
  const norm = siluNorm(u, o, n);
  if (norm <= NSILU_EPS) {
    for (let j = 0; j < n; j++) out[o + j] = 0;
    return;
  }
  const c = Math.sqrt(n) / norm;
  for (let j = 0; j < n; j++) out[o + j] = c * K.silu(u[o + j]!);
}

/** VJP of nsiluRow at u for upstream g, written into out (0 below the norm guard). */
export function nsiluRowVjp(u: Data, g: Data, o: number, n: number, out: Data, oo = o): void {
  const norm = siluNorm(u, o, n);
  if (norm <= NSILU_EPS) {
    for (let j = 0; j < n; j++) out[oo + j] = 0;
    return;
  }
  let c = 0;
  for (let j = 0; j < n; j++) c = accStep(c + (K.silu(u[o + j]!) / norm) * g[oo + j]!);
  const k = Math.sqrt(n) / norm;
  for (let j = 0; j < n; j++) {
    const sh = K.silu(u[o + j]!) / norm;
    out[oo + j] = k * (g[oo + j]! - sh * c) * K.siluPrime(u[o + j]!);
  }
}

export const normalizedSilu = defineOp<{}>({
  name: "NormalizedSiLU",
  forward([x]) {
    need(x!.shape.length >= 1, "NormalizedSiLU", () => "needs rank >= 1");
    const [r, c] = rowsCols(x!);
    const out = alloc(x!.dtype, x!.size);
    for (let i = 0; i < r; i++) nsiluRow(x!.data, i * c, c, out);
    return new Tensor(x!.dtype, x!.shape, out);
  },
  vjp([x], _o, d) {
    const [r, c] = rowsCols(x!);
    const dx = alloc(x!.dtype, x!.size);
    for (let i = 0; i < r; i++) {
      const tmp = alloc(x!.dtype, c);
      nsiluRowVjp(x!.data.subarray(i * c, i * c + c), d.subarray(i * c, i * c + c), 0, c, tmp);
      dx.set(tmp, i * c);
    }
    return [dx];
  },
  sample(g) {
    // A row of length 1 normalises to ±1, a constant: its gradient is 0, so rows have >= 2 entries.
    return { shapes: [[dim(g), dim(g, 2, 7)]], domains: ["real"], attrs: {} };
  },
  oracle: "fd",
});

const KL_FLOOR = 1e-8;

/**
 * MEMORA's KL retention per row: softmax(alpha · log(max(prior, 1e-8)) − theta · grad).
 * The row softmax is per row (not over the whole buffer, unlike NL_Hecate's tape).
 */
export const klRetention = defineOp<{ alpha: number; theta: number }>({
  name: "KLRetention",
  forward([prior, grad], { alpha, theta }) {
    sameShapes("KLRetention", prior!, grad!);
    const [r, c] = rowsCols(prior!);
    const z = alloc(prior!.dtype, prior!.size);
    for (let i = 0; i < z.length; i++) z[i] = alpha * Math.log(Math.max(prior!.data[i]!, KL_FLOOR)) - theta * grad!.data[i]!;
    return new Tensor(prior!.dtype, prior!.shape, K.softmaxRows(z, r, c, z));
  },
  vjp([prior], out, d, { alpha, theta }) {
    const [r, c] = rowsCols(prior!);
    const dz = K.softmaxRowsVjp(out.data, d, r, c, alloc(prior!.dtype, prior!.size));
    const dPrior = alloc(prior!.dtype, prior!.size);
    const dGrad = alloc(prior!.dtype, prior!.size);
    for (let i = 0; i < dz.length; i++) {
      // Below the clamp the log is constant, so its exact derivative is 0 (docs/spec/decisions.md#d2).
      const p = prior!.data[i]!;
      dPrior[i] = p > KL_FLOOR ? (dz[i]! * alpha) / p : 0;
      dGrad[i] = -theta * dz[i]!;
    }
    return [dPrior, dGrad];
  },
  sample(g) {
    const r = dim(g), c = dim(g, 2, 7);
    const alpha = g.real(0.1, 1);
    const theta = g.real(0.1, 2);
    return { shapes: [[r, c], [r, c]], domains: ["positive", "real"], attrs: { alpha, theta } };
  },
  oracle: "fd",
});
