/** Reductions and the loss: sum, row softmax, cross-entropy and the embedding lookup. */
import * as K from "../numeric.ts";
import { Tensor, alloc } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { dim, need, rank, rowsCols, elementwise } from "./op-checks.ts";

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
