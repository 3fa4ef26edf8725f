/**
 * Hebbian rule (docs/spec/titans-family.md#hebbian), read after write:
 *   M_{t+1} = (1 − α_t) M_t + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Only the α gate; k and q stay raw (D1, §1.2). Frozen read: y_t = M q_t (§4.3, §6).
 */
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { matrixFrozenRead, randomMatrixState, writeReadIdentity } from "./matrix.ts";
import type { RuleDecl } from "./types.ts";

export const hebbian: RuleDecl<"hebbian"> = {
  key: "hebbian",
  sheet: "docs/spec/titans-family.md#hebbian",
  hyper: {},
  projection: "memory",
  gates: ["alpha"],
  normalizeKQ: false,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d] }),
  init: ({ d }, dtype) => ({ M: zeros(dtype, [d, d]) }),
  randomState: randomMatrixState(["M"]),
  inner: {
    saved: ["mStates"],
    forward({ k, v, q, alpha }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const y = alloc(dt, s * d);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const a = alpha!.data[t]!;
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!, r = i * d;
          for (let j = 0; j < d; j++) mStates[mn + r + j] = (1 - a) * mStates[mt + r + j]! + vi * k.data[o + j]!;
        }
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates) },
      };
    },
    backward({ mStates }, { k, v, q, alpha }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const tmp = new Float64Array(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // read y_t = M_{t+1} q_t
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        // write v kᵀ: dv = D k, dk = Dᵀ v
        K.matvec(D, 0, d, d, k.data, o, dv, o);
        K.matTvec(D, 0, d, d, v.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = tmp[j]!;
        const a = alpha!.data[t]!;
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  frozen: matrixFrozenRead,
  // s = 1 from M_0 = 0: alpha never acts.
  checkMinimums: { seq_len: 2 },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#hebbian-tests write_read: alpha=0, M_0=0 gives M_1 = v k^T, and q = e0 reads y[1] = 1",
      check: (dtype) => writeReadIdentity(hebbian.inner, dtype, { alpha: 0 }),
    },
  ],
};
