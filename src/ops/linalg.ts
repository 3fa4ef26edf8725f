/** Linear algebra ops: matrix products, transpose, outer product and the Frobenius inner product. */
import * as K from "../numeric.ts";
import { Tensor, alloc, shapeStr } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { dim, need, rank, sameShapes, scaled } from "./op-checks.ts";

export const matmul = defineOp<{}>({
  name: "Matmul",
  forward([a, b]) {
    rank(a!, 2, "Matmul", "A");
    rank(b!, 2, "Matmul", "B");
    const [m, k] = a!.shape as [number, number];
    const [k2, n] = b!.shape as [number, number];
    need(k === k2, "Matmul", () => `inner dimensions differ: A ${shapeStr(a!.shape)}, B ${shapeStr(b!.shape)}`);
    return new Tensor(a!.dtype, [m, n], K.matmul(a!.data, b!.data, m, k, n, alloc(a!.dtype, m * n)));
  },
  vjp([a, b], _out, d) {
    const [m, k] = a!.shape as [number, number];
    const n = b!.shape[1]!;
    return [
      K.matmulTB(d, b!.data, m, n, k, alloc(a!.dtype, m * k)),
      K.matmulTA(a!.data, d, k, m, n, alloc(a!.dtype, k * n)),
    ];
  },
  sample(g) {
    const m = dim(g), k = dim(g), n = dim(g);
    return { shapes: [[m, k], [k, n]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});

export const matmulTransposeB = defineOp<{}>({
  name: "MatmulTransposeB",
  forward([a, b]) {
    rank(a!, 2, "MatmulTransposeB", "A");
    rank(b!, 2, "MatmulTransposeB", "B");
    const [m, k] = a!.shape as [number, number];
    const [n, k2] = b!.shape as [number, number];
    need(k === k2, "MatmulTransposeB", () => `inner dimensions differ: A ${shapeStr(a!.shape)}, B ${shapeStr(b!.shape)}`);
    return new Tensor(a!.dtype, [m, n], K.matmulTB(a!.data, b!.data, m, k, n, alloc(a!.dtype, m * n)));
  },
  vjp([a, b], _out, d) {
    const [m, k] = a!.shape as [number, number];
    const n = b!.shape[0]!;
    return [
      K.matmul(d, b!.data, m, n, k, alloc(a!.dtype, m * k)),
      K.matmulTA(d, a!.data, n, m, k, alloc(a!.dtype, n * k)),
    ];
  },
  sample(g) {
    const m = dim(g), k = dim(g), n = dim(g);
    return { shapes: [[m, k], [n, k]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});

export const transpose = defineOp<{}>({
  name: "Transpose",
  forward([a]) {
    rank(a!, 2, "Transpose", "input");
    const [r, c] = a!.shape as [number, number];
    return new Tensor(a!.dtype, [c, r], K.transpose(a!.data, r, c, alloc(a!.dtype, r * c)));
  },
  vjp([a], _o, d) {
    const [r, c] = a!.shape as [number, number];
    return [K.transpose(d, c, r, alloc(a!.dtype, r * c))];
  },
  sample(g) {
    return { shapes: [[dim(g), dim(g)]], domains: ["real"], attrs: {} };
  },
  oracle: "fd",
});

export const outerProduct = defineOp<{}>({
  name: "OuterProduct",
  forward([a, b]) {
    rank(a!, 1, "OuterProduct", "a");
    rank(b!, 1, "OuterProduct", "b");
    const m = a!.size, n = b!.size;
    const out = alloc(a!.dtype, m * n);
    for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) out[i * n + j] = a!.data[i]! * b!.data[j]!;
    return new Tensor(a!.dtype, [m, n], out);
  },
  vjp([a, b], _o, d) {
    const m = a!.size, n = b!.size;
    const da = alloc(a!.dtype, m), db = alloc(a!.dtype, n);
    K.matmul(d, b!.data, m, n, 1, da);
    K.matmulTA(d, a!.data, n, m, 1, db);
    return [da, db];
  },
  sample(g) {
    return { shapes: [[dim(g)], [dim(g)]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});

export const frobeniusDot = defineOp<{}>({
  name: "FrobeniusDot",
  forward([a, b]) {
    sameShapes("FrobeniusDot", a!, b!);
    const out = alloc(a!.dtype, 1);
    out[0] = K.dot(a!.data, b!.data);
    return new Tensor(a!.dtype, [], out);
  },
  vjp([a, b], _o, d) {
    return [scaled(b!.data, d[0]!), scaled(a!.data, d[0]!)];
  },
  sample(g) {
    const r = dim(g), c = dim(g);
    return { shapes: [[r, c], [r, c]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});
