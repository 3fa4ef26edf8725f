/** Elementwise ops: the binary arithmetic, scaling, the activations and the elementwise retention and gate. */
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { sameShapes, mapData, scaled, elementwise } from "./op-checks.ts";

function binary(name: string, f: (a: number, b: number) => number,
  vjp: (a: Data, b: Data, d: Data) => [Data, Data]) {
  return defineOp<{}>({
    name,
    forward([a, b]) {
      sameShapes(name, a!, b!);
      const out = alloc(a!.dtype, a!.size);
      for (let i = 0; i < out.length; i++) out[i] = f(a!.data[i]!, b!.data[i]!);
      return new Tensor(a!.dtype, a!.shape, out);
    },
    vjp([a, b], _o, d) {
      return vjp(a!.data, b!.data, d);
    },
    sample(g) {
      const s = elementwise(g);
      return { shapes: [s, s], domains: ["real", "real"], attrs: {} };
    },
    oracle: "fd",
  });
}

export const add = binary("Add", (a, b) => a + b, (_a, _b, d) => [d, d]);
export const sub = binary("Sub", (a, b) => a - b, (_a, _b, d) => [d, scaled(d, -1)]);
export const mul = binary("Mul", (a, b) => a * b, (a, b, d) => {
  const da = d.slice(), db = d.slice();
  for (let i = 0; i < d.length; i++) {
    da[i]! *= b[i]!;
    db[i]! *= a[i]!;
  }
  return [da, db];
});

export const scale = defineOp<{ c: number }>({
  name: "Scale",
  forward([x], { c }) {
    return mapData(x!, (v) => c * v);
  },
  vjp(_x, _o, d, { c }) {
    return [scaled(d, c)];
  },
  sample(g) {
    const c = g.real(0.25, 3) * (g.bool() ? -1 : 1);
    return { shapes: [elementwise(g)], domains: ["real"], attrs: { c } };
  },
  symbolic: "c * x",
  oracle: "fd",
});

export const negate = defineOp<{}>({
  name: "Negate",
  forward([x]) {
    return mapData(x!, (v) => -v);
  },
  vjp(_x, _o, d) {
    return [scaled(d, -1)];
  },
  sample(g) {
    return { shapes: [elementwise(g)], domains: ["real"], attrs: {} };
  },
  symbolic: "-x",
  oracle: "fd",
});

function unary(name: string, f: (v: number) => number, df: (x: number, y: number) => number, expr: string) {
  return defineOp<{}>({
    name,
    forward([x]) {
      return mapData(x!, f);
    },
    vjp([x], out, d) {
      const dx = d.slice();
      for (let i = 0; i < dx.length; i++) dx[i]! *= df(x!.data[i]!, out.data[i]!);
      return [dx];
    },
    sample(g) {
      return { shapes: [elementwise(g)], domains: ["real"], attrs: {} };
    },
    symbolic: expr,
    oracle: "fd",
  });
}

// VJPs per seed: sigmoid from its saved output; softplus' = sigmoid; silu' = s(1 + x(1-s)).
export const sigmoid = unary("Sigmoid", K.sigmoid, (_x, y) => y * (1 - y), "1 / (1 + exp(-x))");
export const softplus = unary("Softplus", K.softplus, (x) => K.sigmoid(x), "log(1 + exp(x))");
export const siluOp = unary("SiLU", K.silu, (x) => K.siluPrime(x), "x / (1 + exp(-x))");

export const l2Retention = defineOp<{ lambda: number }>({
  name: "L2Retention",
  forward([x], { lambda }) {
    return mapData(x!, (v) => lambda * v);
  },
  vjp(_x, _o, d, { lambda }) {
    return [scaled(d, lambda)];
  },
  sample(g) {
    const lambda = g.real(0.05, 1);
    return { shapes: [elementwise(g)], domains: ["real"], attrs: { lambda } };
  },
  symbolic: "lambda * x",
  oracle: "fd",
});

export const straightThroughBool = defineOp<{ threshold: number }>({
  name: "StraightThroughBool",
  forward([x], { threshold }) {
    return mapData(x!, (v) => (v > threshold ? 1 : 0));
  },
  // Straight-through estimator: the VJP is the identity by definition, not the step's derivative.
  vjp(_x, _o, d) {
    return [d];
  },
  sample(g) {
    const threshold = g.real(-0.5, 0.5);
    return { shapes: [elementwise(g)], domains: ["real"], attrs: { threshold } };
  },
  oracle: "surrogate",
  surrogateVjp: (_x, d) => [d.slice()],
});
