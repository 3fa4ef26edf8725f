/**
 * GLA, gated linear attention (docs/spec/linear-attention.md#gla): Hebbian with a decay per key
 * channel. α_t is a channel gate ([s, d], types.ts gateShape), a_t = 1 − α_t:
 *   M_{t+1} = M_t diag(a_t) + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * M is [d_v, d_k], so the key channels are M's columns (fla's S = Mᵀ, exp g_t = a_t). With every
 * channel of α_t equal it is Hebbian (hebbian.ts), which is simple GLA; the invariant below checks
 * it bitwise. k and q stay raw, as for Hebbian. Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc } from "../tensor.ts";
import { hebbian } from "./hebbian.ts";
import { channelDecayActsOnItsColumn, equalsScalarRuleAtEqualChannels } from "./kda.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { writeReadIdentity } from "./matrix.ts";
import type { RuleDecl } from "./types.ts";

export const gla: RuleDecl<"gla"> = {
  key: "gla",
  sheet: "docs/spec/linear-attention.md#gla",
  // what it shares with Hebbian (docs/spec/linear-attention.md#gla-params): parameters (α's per
  // channel), raw k and q, the state M [d, d] and its initial and random values, the frozen read
  hyper: hebbian.hyper,
  projection: hebbian.projection,
  gates: hebbian.gates,
  channelGates: ["alpha"],
  normalizeKQ: hebbian.normalizeKQ,
  omega: hebbian.omega,
  stateShapes: hebbian.stateShapes,
  init: hebbian.init,
  randomState: hebbian.randomState,
  frozen: hebbian.frozen,
  checkMinimums: { d: 2, seq_len: 2 },
  inner: {
    saved: ["mStates"],
    forward({ k, v, q, alpha }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const y = alloc(dt, s * d);
      const A = alpha!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // column j (key channel j) keeps 1 − α_{t,j}; then the write v kᵀ
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!, r = i * d;
          for (let j = 0; j < d; j++) mStates[mn + r + j] = (1 - A[o + j]!) * mStates[mt + r + j]! + vi * k.data[o + j]!;
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
      const M = mStates!.data, A = alpha!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const tmp = accBuffer(d), col = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // read y_t = M_{t+1} q_t
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        // the decay: dα_{t,j} = −Σ_i D_{ij} (M_t)_{ij}, column j's share of Hebbian's −⟨D, M_t⟩
        col.fill(0);
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) col[j]! += D[i * d + j]! * M[mt + i * d + j]!;
        for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
        // write v kᵀ: dv = D k, dk = Dᵀ v
        K.matvec(D, 0, d, d, k.data, o, dv, o);
        K.matTvec(D, 0, d, d, v.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = tmp[j]!;
        // ∂L/∂M_t = D diag(a_t)
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) D[i * d + j]! *= 1 - A[o + j]!;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s, d], dalpha),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/linear-attention.md#gla-tests write_read: alpha=0 on every channel, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(gla.inner, dtype, { alpha: 0 }, ["alpha"]),
    },
    {
      name: "Hebbian (simple GLA) at equal channels",
      spec: "docs/spec/linear-attention.md#gla-tests with every channel of alpha_t equal GLA is Hebbian, bitwise but for dalpha, whose channel sum is Hebbian's dalpha",
      check: (dtype, seed) => equalsScalarRuleAtEqualChannels(gla.inner, hebbian.inner, "Hebbian", dtype, seed),
    },
    {
      name: "a channel's decay acts on its key column",
      spec: "docs/spec/linear-attention.md#gla-tests one channel: alpha_t = 1 on key channel c alone, v = 0: M_1 is M_0 with column c zeroed, the others bitwise M_0's",
      check: (dtype, seed) => channelDecayActsOnItsColumn(gla.inner, dtype, seed),
    },
  ],
};
