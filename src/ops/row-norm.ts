/** Row L2 normalisation ops: the norm itself, the unit-sphere projection and the key/query normalisation. */
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { dim, rank, scaled, elementwise } from "./op-checks.ts";

const L2_EPS = 1e-8;

export const l2Norm = defineOp<{}>({
  name: "L2Norm",
  forward([x]) {
    const out = alloc(x!.dtype, 1);
    out[0] = Math.sqrt(K.dot(x!.data, x!.data));
    return new Tensor(x!.dtype, [], out);
  },
  // At x = 0 the denominator is clamped to eps (seed): the gradient is x/eps = 0, not NaN.
  vjp([x], out, d) {
    return [scaled(x!.data, d[0]! / Math.max(out.data[0]!, L2_EPS))];
  },
  sample(g) {
    return { shapes: [elementwise(g)], domains: ["real"], attrs: {} };
  },
  oracle: "fd",
});

/** Row-wise r / max(||r||, eps) and its exact VJP (docs/spec/titans-family.md#l2-normalization). */
function normalizeRows(x: Data, rows: number, cols: number, out: Data): Data {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    const n = Math.max(Math.sqrt(K.dot(x, x, cols, o, o)), L2_EPS);
    for (let j = 0; j < cols; j++) out[o + j] = x[o + j]! / n;
  }
  return out;
}
function normalizeRowsVjp(x: Data, y: Data, d: Data, rows: number, cols: number, out: Data): Data {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    const n = Math.sqrt(K.dot(x, x, cols, o, o));
    if (n >= L2_EPS) {
      const c = K.dot(d, y, cols, o, o);
      for (let j = 0; j < cols; j++) out[o + j] = (d[o + j]! - y[o + j]! * c) / n;
    } else {
      for (let j = 0; j < cols; j++) out[o + j] = d[o + j]! / L2_EPS;
    }
  }
  return out;
}
function rowNormOp(name: string) {
  return defineOp<{}>({
    name,
    forward([x]) {
      rank(x!, 2, name, "input");
      const [r, c] = x!.shape as [number, number];
      return new Tensor(x!.dtype, x!.shape, normalizeRows(x!.data, r, c, alloc(x!.dtype, x!.size)));
    },
    vjp([x], out, d) {
      const [r, c] = x!.shape as [number, number];
      return [normalizeRowsVjp(x!.data, out.data, d, r, c, alloc(x!.dtype, x!.size))];
    },
    sample(g) {
      return { shapes: [[dim(g), dim(g, 2, 7)]], domains: ["real"], attrs: {} };
    },
    oracle: "fd",
  });
}
/** Lattice OSR: each of the m slots (rows) projected onto the unit sphere. */
export const sphereProjectNormalize = rowNormOp("SphereProjectNormalize");
/** Delta/Titans key and query normalisation. */
export const l2NormalizeRows = rowNormOp("L2NormalizeRows");
