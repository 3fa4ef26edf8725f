/** Pieces shared by the matrix-memory rules (Delta, Titans, Hebbian, Atlas): state M [d, d]. */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros, type DType } from "../tensor.ts";
import type { Rng } from "../rng.ts";
import { gradTensor } from "./state-grad.ts";
import type { FrozenPair, GateName, InnerPair, StateSampler } from "./types.ts";

/** Frozen read y_t = M q_t with its VJP dq_t = Mᵀ dy_t (docs/spec/titans-family.md#delta-frozen, docs/spec/titans-family.md#frozen-reads). */
export const matrixFrozenRead: FrozenPair<"M"> = {
  saved: ["M"],
  forward(q, state, { d, seq_len: s }) {
    const M = state.M!;
    const y = alloc(q.dtype, s * d);
    for (let t = 0; t < s; t++) K.matvec(M.data, 0, d, d, q.data, t * d, y, t * d);
    return { y: new Tensor(q.dtype, [s, d], y), saved: { M } };
  },
  backward({ M }, q, dy, { d, seq_len: s }) {
    const dq = alloc(q.dtype, s * d);
    for (let t = 0; t < s; t++) K.matTvec(M!.data, 0, d, d, dy.data, t * d, dq, t * d);
    // dM = Σ_t dy_t q_tᵀ, summed in f64 and stored once
    const dM = accBuffer(d * d);
    for (let t = 0; t < s; t++) K.addOuter(dM, 0, d, d, 1, dy.data, t * d, q.data, t * d);
    return { dq: new Tensor(q.dtype, [s, d], dq), dState: { M: gradTensor(q.dtype, [d, d], dM) } };
  },
};

/** Random d x d states, entries U(-0.5, 0.5)/sqrt(d), for the named matrices. */
export function randomMatrixState(names: readonly string[]): StateSampler {
  return ({ d }, dtype, rnd) => {
    const out: Record<string, Tensor> = {};
    for (const n of names) {
      const t = new Tensor(dtype, [d, d]);
      for (let i = 0; i < t.size; i++) t.data[i] = (rnd() - 0.5) / Math.sqrt(d);
      out[n] = t;
    }
    return out;
  };
}

/**
 * The write-read identity of the matrix rules (docs/spec/titans-family.md#delta-tests, docs/spec/titans-family.md#hebbian-tests): one token with
 * k = e0, v = e1 from M_0 = 0, gates chosen so the write is exactly v kᵀ, must leave M_1 = v kᵀ and
 * read y[1] = 1 with q = e0 (a gate in `channelGates` is [1, d], the value on every channel).
 * Returns null when it holds.
 */
export function writeReadIdentity(inner: InnerPair<string>, dtype: DType, gates: Partial<Record<GateName, number>>,
  channelGates: readonly GateName[] = []): string | null {
  const d = 4;
  const k = zeros(dtype, [1, d]), v = zeros(dtype, [1, d]), q = zeros(dtype, [1, d]);
  k.data[0] = 1;
  v.data[1] = 1;
  q.data[0] = 1;
  const g: Partial<Record<GateName, Tensor>> = {};
  for (const [name, value] of Object.entries(gates)) {
    // a channel gate (KDA's α) holds the value on every key channel
    const t = zeros(dtype, channelGates.includes(name as GateName) ? [1, d] : [1]);
    t.data.fill(value);
    g[name as GateName] = t;
  }
  const r = inner.forward({ k, v, q, x: k, ...g }, { M: zeros(dtype, [d, d]) }, { d, seq_len: 1 });
  const M = r.finalState.M!.data;
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) {
    const want = i === 1 && j === 0 ? 1 : 0;
    if (M[i * d + j] !== want) return `M[${i},${j}] = ${M[i * d + j]}, expected ${want}`;
  }
  if (r.y.data[1] !== 1) return `read with q = e0 gave y[1] = ${r.y.data[1]}, expected 1`;
  return null;
}

/** A tensor of uniform draws in [lo, hi) from `rng`, in index order (the invariants' random cases). */
export function randTensor(rng: Rng, dtype: DType, shape: number[], lo: number, hi: number): Tensor {
  const t = new Tensor(dtype, shape);
  for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
  return t;
}

/** Each row of an [s, d] tensor scaled to unit L2 norm, in place. */
export function unitRows(t: Tensor): Tensor {
  const [s, d] = t.shape as [number, number];
  for (let r = 0; r < s; r++) {
    let n = 0;
    for (let i = 0; i < d; i++) n += t.data[r * d + i]! ** 2;
    for (let i = 0; i < d; i++) t.data[r * d + i]! /= Math.sqrt(n);
  }
  return t;
}
