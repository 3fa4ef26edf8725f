/**
 * Atlas Omega, the implemented version (docs/spec/titans-family.md#atlas-forward, docs/spec/titans-family.md#atlas-backward, docs/spec/decisions.md#d8), read after write:
 *   Ω_t = ω_t k_tᵀ   with ω_t = W_omega silu([k_t; v_t]) supplied by the level
 *   S_{t+1} = η_t S_t − θ_t Ω_t ;  M_{t+1} = (1 − α_t) M_t + S_{t+1} ;  y_t = M_{t+1} q_t
 * No error term: M never enters the update direction. k and q stay raw (D1, §1.2).
 * Frozen read: y_t = M q_t (§5.2, §6).
 */
import { Rng, uniformTensor } from "../rng.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { matrixFrozenRead, randomMatrixState } from "./matrix.ts";
import type { RuleDecl } from "./types.ts";

export const atlas: RuleDecl<"atlas"> = {
  key: "atlas",
  sheet: "docs/spec/titans-family.md#atlas-forward, docs/spec/titans-family.md#atlas-backward (implemented version, D8)",
  hyper: {},
  projection: "memory",
  gates: ["alpha", "theta", "eta"],
  normalizeKQ: false,
  omega: true,
  stateShapes: ({ d }) => ({ M: [d, d], S: [d, d] }),
  init: ({ d }, dtype) => ({ M: zeros(dtype, [d, d]), S: zeros(dtype, [d, d]) }),
  randomState: randomMatrixState(["M", "S"]),
  inner: {
    saved: ["mStates", "sStates"],
    forward({ k, q, alpha, theta, eta, omega }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const sStates = alloc(dt, (s + 1) * dd);
      sStates.set(state.S!.data);
      const y = alloc(dt, s * d);
      const w = omega!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const a = alpha!.data[t]!, th = theta!.data[t]!, et = eta!.data[t]!;
        for (let i = 0; i < d; i++) {
          const wi = -th * w[o + i]!, r = i * d;
          for (let j = 0; j < d; j++) {
            sStates[mn + r + j] = et * sStates[mt + r + j]! + wi * k.data[o + j]!;
            mStates[mn + r + j] = (1 - a) * mStates[mt + r + j]! + sStates[mn + r + j]!;
          }
        }
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: {
          M: new Tensor(dt, [d, d], mStates.slice(s * dd)),
          S: new Tensor(dt, [d, d], sStates.slice(s * dd)),
        },
        saved: {
          mStates: new Tensor(dt, [s + 1, d, d], mStates),
          sStates: new Tensor(dt, [s + 1, d, d], sStates),
        },
      };
    },
    backward({ mStates, sStates }, { k, q, alpha, theta, eta, omega }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, S = sStates!.data, w = omega!.data;
      const dk = alloc(dt, s * d), dq = alloc(dt, s * d), domega = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s), deta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const E = adjointFrom(dFinal, "S", dd); // ∂L/∂S_{t+1}; after t = 0, ∂L/∂S_0
      const ek = new Float64Array(d), tmp = new Float64Array(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const a = alpha!.data[t]!, th = theta!.data[t]!, et = eta!.data[t]!;
        // read y_t = M_{t+1} q_t
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        // M_{t+1} = (1−α)M_t + S_{t+1}: S_{t+1} receives all of D
        for (let i = 0; i < dd; i++) E[i]! += D[i]!;
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        // dη = ⟨S_t, E⟩, dθ = −⟨Ω_t, E⟩ = −ωᵀ E k
        deta[t] = K.frob(S, mt, E, 0, dd);
        K.matvec(E, 0, d, d, k.data, o, ek, 0);
        dtheta[t] = -K.dot(w, ek, d, o, 0);
        // dΩ = −θ E:  dω = dΩ k = −θ E k ;  dk = dΩᵀ ω = −θ Eᵀ ω
        for (let i = 0; i < d; i++) domega[o + i] = -th * ek[i]!;
        K.matTvec(E, 0, d, d, w, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -th * tmp[j]!;
        for (let i = 0; i < dd; i++) {
          D[i]! *= 1 - a;
          E[i]! *= et;
        }
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dq: new Tensor(dt, [s, d], dq), domega: new Tensor(dt, [s, d], domega),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta), deta: new Tensor(dt, [s], deta),
        dState0: { M: gradTensor(dt, [d, d], D), S: gradTensor(dt, [d, d], E) },
      };
    },
  },
  frozen: matrixFrozenRead,
  // s = 1 from zero states: alpha and eta never act.
  checkMinimums: { seq_len: 2 },
  stepLocalState: ["S"],
  invariants: [
    {
      name: "omega is state-independent",
      spec: "docs/spec/titans-family.md#atlas-forward (no error term, M never enters the update direction); §5.3 omega_state_independent",
      check(dtype, seed) {
        const d = 5, s = 6;
        const rng = new Rng(seed);
        const k = uniformTensor(dtype, [s, d], rng, -1, 1), v = uniformTensor(dtype, [s, d], rng, -1, 1);
        const q = uniformTensor(dtype, [s, d], rng, -1, 1), omega = uniformTensor(dtype, [s, d], rng, -1, 1);
        const alpha = uniformTensor(dtype, [s], rng, 0.05, 0.95), theta = uniformTensor(dtype, [s], rng, 0.05, 0.9);
        const eta = uniformTensor(dtype, [s], rng, 0.05, 0.95);
        const S0 = uniformTensor(dtype, [d, d], rng, -0.3, 0.3);
        const inp = { k, v, q, x: k, alpha, theta, eta, omega };
        const cfg = { d, seq_len: s };
        const runs = [zeros(dtype, [d, d]), uniformTensor(dtype, [d, d], rng, -0.3, 0.3)].map((M0) => {
          const r = atlas.inner.forward(inp, { M: M0, S: S0 }, cfg);
          return { M: r.saved.mStates!.data, S: r.saved.sStates!.data };
        });
        const dd = d * d;
        // The update added to the retained memory, M_{t+1} − (1−α_t)M_t, is S_{t+1}: it must not
        // depend on M_0, so the two S trajectories agree bit for bit ...
        for (let i = 0; i < (s + 1) * dd; i++) {
          if (!Object.is(runs[0]!.S[i], runs[1]!.S[i])) {
            return `S_${Math.floor(i / dd)}[${i % dd}] differs between M_0 = 0 (${runs[0]!.S[i]}) and random M_0 (${runs[1]!.S[i]})`;
          }
        }
        // ... and in each run M_{t+1} is exactly (1−α_t)M_t + S_{t+1}, rounded once to the dtype.
        const cell = alloc(dtype, 1);
        for (const [n, r] of runs.entries()) {
          for (let t = 0; t < s; t++) {
            const a = alpha.data[t]!;
            for (let i = 0; i < dd; i++) {
              cell[0] = (1 - a) * r.M[t * dd + i]! + r.S[(t + 1) * dd + i]!;
              if (!Object.is(cell[0], r.M[(t + 1) * dd + i])) {
                return `run ${n}: M_${t + 1}[${i}] = ${r.M[(t + 1) * dd + i]} is not (1-alpha)M_${t} + S_${t + 1} = ${cell[0]}`;
              }
            }
          }
        }
        if (runs[0]!.S.every((x, i) => i < dd || x === 0)) return "vacuous: S stayed zero";
        return null;
      },
    },
  ],
};

