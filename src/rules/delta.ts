/**
 * Delta rule (docs/spec/titans-family.md#delta), L2 attentional bias (D9), read after write.
 *   e_t = M_t k_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * k and q are L2-normalised by the level (D1). Frozen read: y_t = M q_t (§2.4).
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { matrixFrozenRead, randomMatrixState, writeReadIdentity } from "./matrix.ts";
import type { RuleDecl } from "./types.ts";

export const delta: RuleDecl<"delta"> = {
  key: "delta",
  sheet: "docs/spec/titans-family.md#delta",
  hyper: {},
  projection: "memory",
  gates: ["alpha", "theta"],
  normalizeKQ: true,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d] }),
  init: ({ d }, dtype) => ({ M: zeros(dtype, [d, d]) }),
  randomState: randomMatrixState(["M"]),
  inner: {
    saved: ["mStates", "e"],
    forward({ k, v, q, alpha, theta }, state, { d, seq_len: s }) {
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const e = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd;
        K.matvec(mStates, mt, d, d, k.data, t * d, e, t * d);
        for (let i = 0; i < d; i++) e[t * d + i]! -= v.data[t * d + i]!;
        const a = alpha!.data[t]!, th = theta!.data[t]!;
        for (let i = 0; i < dd; i++) mStates[mn + i] = (1 - a) * mStates[mt + i]!;
        K.addOuter(mStates, mn, d, d, -th, e, t * d, k.data, t * d);
        K.matvec(mStates, mn, d, d, q.data, t * d, y, t * d);
      }
      const dt = k.dtype;
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates), e: new Tensor(dt, [s, d], e) },
      };
    },
    backward({ mStates, e }, { k, q, alpha, theta }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, E = e!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const de = accBuffer(d), tmp = accBuffer(d);
      // Not shared with the chunk form's Delta (titansTokenBackward without momentum): that one sums dk in
      // f64 and stores it once, while this one stores −θ Dᵀe and then adds M_tᵀde in the state dtype.
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        const th = theta!.data[t]!, a = alpha!.data[t]!;
        // dθ = −⟨D, e kᵀ⟩ = −eᵀ D k
        K.matvec(D, 0, d, d, k.data, o, de, 0); // D k
        dtheta[t] = -K.dot(E, de, d, o, 0);
        // dG = −θ D:  de = dG k = −θ D k ;  dk = dGᵀ e = −θ Dᵀ e
        for (let i = 0; i < d; i++) de[i]! *= -th;
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -th * tmp[j]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
        // prediction M_t k_t: ∂/∂M_t += de kᵀ, ∂/∂k += M_tᵀ de
        K.matTvec(M, mt, d, d, de, 0, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j]! += tmp[j]!;
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
        K.addOuter(D, 0, d, d, 1, de, 0, k.data, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  frozen: matrixFrozenRead,
  matrixChunk: { write: "error", momentum: false },
  // d = 1: a normalised key or query is the constant ±1; s = 1 from M_0 = 0: alpha never acts.
  checkMinimums: { d: 2, seq_len: 2 },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#delta-tests write_read: alpha=0, theta=1, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(delta.inner, dtype, { alpha: 0, theta: 1 }),
    },
  ],
};
