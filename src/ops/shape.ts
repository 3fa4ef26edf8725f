/** Shape ops: concatenation and slicing along an axis. */
import { Tensor, alloc, shapeStr, sizeOf } from "../tensor.ts";
import { defineOp } from "./define.ts";
import { dim, need } from "./op-checks.ts";

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

/**
 * Copies `outer` runs of `n` values, run o from `src[o * srcStride + srcAt]` to
 * `dst[o * dstStride + dstAt]`: short runs element by element (a typed-array view per run costs
 * more than the copy), long runs with set().
 */
function copyRows(src: ArrayLike<number> & { subarray(a: number, b: number): ArrayLike<number> }, dst: { [i: number]: number; set(a: ArrayLike<number>, at: number): void },
  outer: number, n: number, srcStride: number, srcAt: number, dstStride: number, dstAt: number): void {
  for (let o = 0; o < outer; o++) {
    const s0 = o * srcStride + srcAt, d0 = o * dstStride + dstAt;
    if (n < 64) for (let j = 0; j < n; j++) dst[d0 + j] = src[s0 + j]!;
    else dst.set(src.subarray(s0, s0 + n), d0);
  }
}

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
    copyRows(x!.data, out, outer, len * inner, full, start * inner, len * inner, 0);
    return new Tensor(x!.dtype, shape, out);
  },
  vjp([x], _o, d, { axis, start, len }) {
    const outer = sizeOf(x!.shape.slice(0, axis));
    const inner = sizeOf(x!.shape.slice(axis + 1));
    const full = x!.shape[axis]! * inner;
    const dx = alloc(x!.dtype, x!.size);
    copyRows(d, dx, outer, len * inner, len * inner, 0, full, start * inner);
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
