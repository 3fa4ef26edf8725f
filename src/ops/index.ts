/**
 * The tape ops of docs/spec/tape.md (the seed's TapeOp list, plus SumReduce and row L2
 * normalisation). Each is declared once; the exported function is the op.
 */
import * as K from "../numeric.ts";
import { accStep } from "../precision.ts";
import { Tensor, alloc, sameShape, shapeStr, sizeOf, type Data } from "../tensor.ts";
import { defineOp, type Draw } from "./define.ts";

export { allOps, type OpDecl } from "./define.ts";

type G = Draw;
const dim = (g: G, min = 1, max = 7): number => g.int(min, max);

/** Messages are built only on failure: ops run millions of times. */
function need(cond: boolean, op: string, msg: () => string): void {
  if (!cond) throw new Error(`${op}: ${msg()}`);
}
function rank(t: Tensor, r: number, op: string, what: string): void {
  need(t.shape.length === r, op, () => `${what} must have rank ${r}, got shape ${shapeStr(t.shape)}`);
}
function sameShapes(op: string, a: Tensor, b: Tensor): void {
  need(sameShape(a.shape, b.shape), op, () => `shapes differ: ${shapeStr(a.shape)} vs ${shapeStr(b.shape)}`);
  need(a.dtype === b.dtype, op, () => `dtypes differ: ${a.dtype} vs ${b.dtype}`);
}
function mapData(x: Tensor, f: (v: number) => number): Tensor {
  const out = alloc(x.dtype, x.size);
  const d = x.data;
  for (let i = 0; i < d.length; i++) out[i] = f(d[i]!);
  return new Tensor(x.dtype, x.shape, out);
}
function scaled(d: Data, c: number): Data {
  const o = d.slice();
  for (let i = 0; i < o.length; i++) o[i]! *= c;
  return o;
}
/** Rows x cols view of a tensor of rank >= 1 (last axis = cols). */
function rowsCols(t: Tensor): [number, number] {
  const cols = t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1]!;
  return [cols === 0 ? 0 : t.size / cols, cols];
}
const elementwise = (g: G) => {
  const shape = g.shape(1, 3, 6);
  return shape;
};

// ── linear algebra ──────────────────────────────────────────────────────────

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

// ── elementwise ─────────────────────────────────────────────────────────────

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

// ── reductions and structured ops ───────────────────────────────────────────

export const sumReduce = defineOp<{}>({
  name: "SumReduce",
  forward([x]) {
    const out = alloc(x!.dtype, 1);
    let s = 0;
    for (let i = 0; i < x!.size; i++) s += x!.data[i]!;
    out[0] = s;
    return new Tensor(x!.dtype, [], out);
  },
  vjp([x], _o, d) {
    return [alloc(x!.dtype, x!.size).fill(d[0]!)];
  },
  sample(g) {
    return { shapes: [elementwise(g)], domains: ["real"], attrs: {} };
  },
  oracle: "fd",
});

export const softmax = defineOp<{}>({
  name: "Softmax",
  forward([x]) {
    need(x!.shape.length >= 1, "Softmax", () => "needs rank >= 1");
    const [r, c] = rowsCols(x!);
    return new Tensor(x!.dtype, x!.shape, K.softmaxRows(x!.data, r, c, alloc(x!.dtype, x!.size)));
  },
  vjp([x], out, d) {
    const [r, c] = rowsCols(x!);
    return [K.softmaxRowsVjp(out.data, d, r, c, alloc(x!.dtype, x!.size))];
  },
  sample(g) {
    return { shapes: [[dim(g), dim(g, 2, 7)]], domains: ["real"], attrs: {} };
  },
  oracle: "fd",
});

/** Validates target ids per docs/spec/decisions.md#d12: integers in [0, V) or -1 (padding). */
export function checkTargets(targets: readonly number[], s: number, vocab: number, what = "targets"): void {
  if (targets.length !== s) throw new Error(`${what}: length ${targets.length}, expected ${s}`);
  targets.forEach((t, i) => {
    if (!Number.isInteger(t)) throw new Error(`${what}[${i}] = ${t} is not an integer`);
    if (t !== -1 && (t < 0 || t >= vocab)) {
      throw new Error(`${what}[${i}] = ${t} is out of range [0, ${vocab}) (only -1 marks padding)`);
    }
  });
}

export const crossEntropy = defineOp<{ targets: readonly number[] }>({
  name: "CrossEntropy",
  forward([z], { targets }) {
    rank(z!, 2, "CrossEntropy", "logits");
    const [s, V] = z!.shape as [number, number];
    checkTargets(targets, s, V);
    let total = 0, n = 0;
    for (let t = 0; t < s; t++) {
      const tg = targets[t]!;
      if (tg < 0) continue;
      const o = t * V;
      let mx = -Infinity;
      for (let j = 0; j < V; j++) mx = Math.max(mx, z!.data[o + j]!);
      let se = 0;
      for (let j = 0; j < V; j++) se += Math.exp(z!.data[o + j]! - mx);
      total += mx + Math.log(se) - z!.data[o + tg]!;
      n++;
    }
    const out = alloc(z!.dtype, 1);
    out[0] = n === 0 ? 0 : total / n;
    return new Tensor(z!.dtype, [], out);
  },
  vjp([z], _o, d, { targets }) {
    const [s, V] = z!.shape as [number, number];
    const n = targets.filter((t) => t >= 0).length;
    const dz = alloc(z!.dtype, z!.size);
    if (n === 0) return [dz];
    K.softmaxRows(z!.data, s, V, dz);
    for (let t = 0; t < s; t++) {
      const tg = targets[t]!;
      const o = t * V;
      if (tg < 0) {
        dz.fill(0, o, o + V);
        continue;
      }
      dz[o + tg]! -= 1;
      for (let j = 0; j < V; j++) dz[o + j]! *= d[0]! / n;
    }
    return [dz];
  },
  sample(g) {
    const s = dim(g), V = dim(g, 2, 7);
    const targets = g.ints(s, -1, V - 1);
    if (targets.every((t) => t < 0)) targets[0] = 0;
    return { shapes: [[s, V]], domains: ["real"], attrs: { targets } };
  },
  oracle: "fd",
});

export const embedLookup = defineOp<{ indices: readonly number[] }>({
  name: "EmbedLookup",
  forward([table], { indices }) {
    rank(table!, 2, "EmbedLookup", "table");
    const [V, d] = table!.shape as [number, number];
    const out = alloc(table!.dtype, indices.length * d);
    indices.forEach((ix, t) => {
      need(Number.isInteger(ix) && ix >= 0 && ix < V, "EmbedLookup", () => `index[${t}] = ${ix} is out of range [0, ${V})`);
      out.set(table!.data.subarray(ix * d, ix * d + d), t * d);
    });
    return new Tensor(table!.dtype, [indices.length, d], out);
  },
  vjp([table], _o, dOut, { indices }) {
    const d = table!.shape[1]!;
    const dt = alloc(table!.dtype, table!.size);
    indices.forEach((ix, t) => {
      for (let j = 0; j < d; j++) dt[ix * d + j]! += dOut[t * d + j]!;
    });
    return [dt];
  },
  sample(g) {
    const V = dim(g), d = dim(g), s = dim(g);
    const indices = g.ints(s, 0, V - 1);
    return { shapes: [[V, d]], domains: ["real"], attrs: { indices } };
  },
  oracle: "fd",
});

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

export const concat = defineOp<{ axis: number }>({
  name: "Concat",
  forward(parts, { axis }) {
    need(parts.length >= 1, "Concat", () => "needs at least one input");
    const r = parts[0]!.shape.length;
    need(axis >= 0 && axis < r, "Concat", () => `axis ${axis} out of range for rank ${r}`);
    const shape = [...parts[0]!.shape];
    let along = 0;
    parts.forEach((p, i) => {
      need(p.shape.length === r && p.shape.every((s, j) => j === axis || s === shape[j]), "Concat", () => `input ${i} has shape ${shapeStr(p.shape)}, incompatible with ${shapeStr(parts[0]!.shape)} along axis ${axis}`);
      along += p.shape[axis]!;
    });
    shape[axis] = along;
    const outer = sizeOf(shape.slice(0, axis));
    const inner = sizeOf(shape.slice(axis + 1));
    const out = alloc(parts[0]!.dtype, sizeOf(shape));
    let off = 0;
    for (const p of parts) {
      const w = p.shape[axis]! * inner;
      for (let o = 0; o < outer; o++) out.set(p.data.subarray(o * w, o * w + w), o * along * inner + off);
      off += w;
    }
    return new Tensor(parts[0]!.dtype, shape, out);
  },
  vjp(parts, out, d, { axis }) {
    const outer = sizeOf(out.shape.slice(0, axis));
    const inner = sizeOf(out.shape.slice(axis + 1));
    const along = out.shape[axis]!;
    let off = 0;
    return parts.map((p) => {
      const w = p.shape[axis]! * inner;
      const dp = alloc(p.dtype, p.size);
      for (let o = 0; o < outer; o++) dp.set(d.subarray(o * along * inner + off, o * along * inner + off + w), o * w);
      off += w;
      return dp;
    });
  },
  sample(g) {
    const r = dim(g, 1, 3);
    const base = Array.from({ length: r }, () => dim(g, 1, 4));
    const axis = dim(g, 0, r - 1);
    const n = dim(g, 2, 3);
    const shapes = Array.from({ length: n }, () => base.map((s, j) => (j === axis ? dim(g, 1, 4) : s)));
    return { shapes, domains: shapes.map(() => "real" as const), attrs: { axis } };
  },
  oracle: "fd",
});

export const slice = defineOp<{ axis: number; start: number; len: number }>({
  name: "Slice",
  forward([x], { axis, start, len }) {
    const r = x!.shape.length;
    need(axis >= 0 && axis < r, "Slice", () => `axis ${axis} out of range for rank ${r}`);
    need(start >= 0 && len >= 0 && start + len <= x!.shape[axis]!, "Slice",
      () => `range [${start}, ${start + len}) exceeds dimension ${x!.shape[axis]} of ${shapeStr(x!.shape)}`);
    const shape = [...x!.shape];
    shape[axis] = len;
    const outer = sizeOf(x!.shape.slice(0, axis));
    const inner = sizeOf(x!.shape.slice(axis + 1));
    const full = x!.shape[axis]! * inner;
    const out = alloc(x!.dtype, sizeOf(shape));
    for (let o = 0; o < outer; o++) out.set(x!.data.subarray(o * full + start * inner, o * full + (start + len) * inner), o * len * inner);
    return new Tensor(x!.dtype, shape, out);
  },
  vjp([x], _o, d, { axis, start, len }) {
    const outer = sizeOf(x!.shape.slice(0, axis));
    const inner = sizeOf(x!.shape.slice(axis + 1));
    const full = x!.shape[axis]! * inner;
    const dx = alloc(x!.dtype, x!.size);
    for (let o = 0; o < outer; o++) dx.set(d.subarray(o * len * inner, (o + 1) * len * inner), o * full + start * inner);
    return [dx];
  },
  sample(g) {
    const shape = g.shape(1, 3, 6);
    const axis = dim(g, 0, shape.length - 1);
    const start = dim(g, 0, shape[axis]! - 1);
    const len = dim(g, 1, shape[axis]! - start);
    return { shapes: [shape], domains: ["real"], attrs: { axis, start, len } };
  },
  oracle: "fd",
});

// ── NL-specific ops ─────────────────────────────────────────────────────────

const NSILU_EPS = 1e-8;

/**
 * Trellis' normalised SiLU per row of length n: sqrt(n) · silu(u) / ||silu(u)||, and the zero
 * vector when ||silu(u)|| <= 1e-8 (docs/spec/miras-compression.md#trellis-nsilu). The seed's op has no sqrt(n)
 * factor; we follow the rule that uses it, so the op and Trellis agree.
 */
export function nsiluRow(u: Data, o: number, n: number, out: Data): void {
  let ss = 0;
  for (let j = 0; j < n; j++) {
    const s = K.silu(u[o + j]!);
    ss = accStep(ss + s * s);
  }
  const norm = Math.sqrt(ss);
  if (norm <= NSILU_EPS) {
    for (let j = 0; j < n; j++) out[o + j] = 0;
    return;
  }
  const c = Math.sqrt(n) / norm;
  for (let j = 0; j < n; j++) out[o + j] = c * K.silu(u[o + j]!);
}

/** VJP of nsiluRow at u for upstream g, written into out (0 below the norm guard). */
export function nsiluRowVjp(u: Data, g: Data, o: number, n: number, out: Data, oo = o): void {
  let ss = 0;
  for (let j = 0; j < n; j++) {
    const s = K.silu(u[o + j]!);
    ss = accStep(ss + s * s);
  }
  const norm = Math.sqrt(ss);
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
export { chunkCoefficients, gateScale, rowScale, unitLowerSolve, type GateForm } from "./chunk.ts";
