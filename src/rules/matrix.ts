/** Pieces shared by the matrix-memory rules (Delta, Titans, Hebbian, Atlas): state M [d, d]. */
import * as K from "../numeric.ts";
import { Tensor, alloc } from "../tensor.ts";
import type { FrozenPair, StateSampler } from "./types.ts";

/** Frozen read y_t = M q_t with its VJP dq_t = Mᵀ dy_t (rules-titans-family §2.4, §6). */
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
    return { dq: new Tensor(q.dtype, [s, d], dq) };
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
