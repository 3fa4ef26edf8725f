/**
 * Gated Oja rule (docs/spec/delta-family-2.md#gated-oja), as fla's gated_oja_rule computes it: the
 * memory reconstructs the key from the value, and the correction erases along the value. α_t is a
 * channel gate per **value** channel (a row of M [d_v, d_k]), a_t = 1 − α_t; θ_t one step per token:
 *   M̃_t = diag(a_t) M_t ;  ε_t = M̃_tᵀ v_t − k_t ;  M_{t+1} = M̃_t − θ_t v_t ε_tᵀ ;  y_t = M_{t+1} q_t
 * i.e. M_{t+1} = (I − θ_t v_t v_tᵀ) M̃_t + θ_t v_t k_tᵀ. Its transpose is KDA (kda.ts) with the roles of
 * k and v swapped; the invariant below checks it bitwise. k and q are L2-normalised by the level (D1),
 * v is not. Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { kda } from "./kda.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { randTensor, unitRows, writeReadIdentity } from "./matrix.ts";
import type { InnerPair, RuleDecl } from "./types.ts";

export const gated_oja: RuleDecl<"gated_oja"> = {
  key: "gated_oja",
  sheet: "docs/spec/delta-family-2.md#gated-oja",
  // what it shares with KDA (docs/spec/delta-family-2.md#gated-oja-params): gates (α per channel,
  // θ per token), the state M [d, d] and its initial and random values, the frozen read, the minimums
  hyper: kda.hyper,
  projection: kda.projection,
  gates: kda.gates,
  channelGates: ["alpha"],
  normalizeKQ: kda.normalizeKQ,
  omega: kda.omega,
  stateShapes: kda.stateShapes,
  init: kda.init,
  randomState: kda.randomState,
  frozen: kda.frozen,
  checkMinimums: kda.checkMinimums,
  inner: {
    saved: ["mStates", "e"],
    forward({ k, v, q, alpha, theta }, state, { d, seq_len: s }) {
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const e = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      const c = accBuffer(d);
      const A = alpha!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const th = theta!.data[t]!;
        // M̃_t = diag(1 − α_t) M_t: row i (value channel i) keeps 1 − α_{t,i}; in place of M_{t+1}
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) mStates[mn + i * d + j] = (1 - A[o + i]!) * mStates[mt + i * d + j]!;
        // ε_t = M̃_tᵀ v_t − k_t: the key the decayed memory reconstructs from the value, less the key
        K.matTvec(mStates, mn, d, d, v.data, o, e, o);
        for (let j = 0; j < d; j++) e[o + j]! -= k.data[o + j]!;
        // M_{t+1} = M̃_t − v_t (θ_t ε_t)ᵀ
        for (let j = 0; j < d; j++) c[j] = -th * e[o + j]!;
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!, r = mn + i * d;
          for (let j = 0; j < d; j++) mStates[r + j]! += c[j]! * vi;
        }
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      const dt = k.dtype;
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates), e: new Tensor(dt, [s, d], e) },
      };
    },
    backward({ mStates, e }, { k, v, q, alpha, theta }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, E = e!.data, A = alpha!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d), dtheta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const de = accBuffer(d), tmp = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        const th = theta!.data[t]!;
        // dθ = −⟨D, v εᵀ⟩ = −εᵀ Dᵀ v
        K.matTvec(D, 0, d, d, v.data, o, de, 0);
        dtheta[t] = -K.dot(E, de, d, o, 0);
        // the write −θ v εᵀ: de = ∂L/∂ε = −θ Dᵀ v ; dv = −θ D ε ; ε = M̃ᵀ v − k: dk = −de
        for (let j = 0; j < d; j++) de[j]! *= -th;
        K.matvec(D, 0, d, d, E, o, tmp, 0);
        for (let i = 0; i < d; i++) dv[o + i] = -th * tmp[i]!;
        for (let j = 0; j < d; j++) dk[o + j] = -de[j]!;
        // the reconstruction M̃_tᵀ v with M̃_t = diag(a_t) M_t: ∂/∂v += diag(a_t) M_t de, ∂/∂M̃_t = D + v deᵀ
        K.matvec(M, mt, d, d, de, 0, tmp, 0);
        for (let i = 0; i < d; i++) dv[o + i]! += (1 - A[o + i]!) * tmp[i]!;
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!;
          for (let j = 0; j < d; j++) D[i * d + j]! += de[j]! * vi;
        }
        // the decay: dα_{t,i} = −Σ_j (∂L/∂M̃_t)_{ij} (M_t)_{ij} ; ∂L/∂M_t = diag(a_t) ∂L/∂M̃_t
        for (let i = 0; i < d; i++) {
          dalpha[o + i] = -K.dot(D, M, d, i * d, mt + i * d);
          const a = 1 - A[o + i]!;
          for (let j = 0; j < d; j++) D[i * d + j]! *= a;
        }
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s, d], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/delta-family-2.md#gated-oja-tests write_read: alpha=0 on every channel, theta=1, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(gated_oja.inner, dtype, { alpha: 0, theta: 1 }, ["alpha"]),
    },
    {
      name: "KDA transposed, k and v swapped",
      spec: "docs/spec/delta-family-2.md#gated-oja-tests with k and v swapped, every state is the transpose of KDA's and y the transposed read of KDA's states; with dy = 0 every gradient is KDA's (dk and dv swapped, dM_0 transposed), bitwise",
      check: (dtype, seed) => transposedKda(gated_oja.inner, dtype, seed),
    },
  ],
};

/** The d×d block at `o` of `a`, transposed, in a fresh tensor. */
function transposed(dtype: DType, a: ArrayLike<number>, o: number, d: number): Tensor {
  const t = new Tensor(dtype, [d, d]);
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) t.data[j * d + i] = a[o + i * d + j]!;
  return t;
}

/**
 * The gated Oja rule is KDA on Mᵀ with k and v swapped: on a random case with a random initial state
 * and per-channel α, every state M_1 … M_s must be the transpose of KDA's (run from M_0ᵀ with key v
 * and value k) and y_t = M_{t+1} q_t KDA's states read transposed, bitwise; with dy = 0 and dM_s
 * given, dk is KDA's dv, dv KDA's dk, and dα, dθ and dM_0 (transposed) KDA's, bitwise (the same
 * products summed in the same order). Returns null when they do.
 */
export function transposedKda(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7, dd = d * d;
  const k = unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v = randTensor(rng, dtype, [s, d], -0.8, 0.8);
  const q = unitRows(randTensor(rng, dtype, [s, d], -1, 1));
  const alpha = randTensor(rng, dtype, [s, d], 0.05, 0.95), theta = randTensor(rng, dtype, [s], 0.05, 0.9);
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const cfg = { d, seq_len: s };
  const oi = { k, v, q, x: k, alpha, theta }, ki = { k: v, v: k, q, x: v, alpha, theta };
  const a = inner.forward(oi, { M: M0 }, cfg);
  const b = kda.inner.forward(ki, { M: transposed(dtype, M0.data, 0, d) }, cfg);
  const Ma = a.saved.mStates!.data, Mb = b.saved.mStates!.data;
  for (let t = 1; t <= s; t++) {
    const mt = transposed(dtype, Mb, t * dd, d);
    for (let i = 0; i < dd; i++) if (!Object.is(Ma[t * dd + i], mt.data[i])) return `M_${t}[${i}] = ${Ma[t * dd + i]}, KDA's transposed is ${mt.data[i]}`;
    const y = new Tensor(dtype, [d]);
    K.matTvec(Mb, t * dd, d, d, q.data, (t - 1) * d, y.data, 0);
    for (let i = 0; i < d; i++) if (!Object.is(a.y.data[(t - 1) * d + i], y.data[i])) return `y[${t - 1}][${i}] = ${a.y.data[(t - 1) * d + i]}, KDA's state read transposed gives ${y.data[i]}`;
  }
  const zero = new Tensor(dtype, [s, d]);
  const ga = inner.backward(a.saved, oi, zero, cfg, { M: dM });
  const gb = kda.inner.backward(b.saved, ki, zero, cfg, { M: transposed(dtype, dM.data, 0, d) });
  const dM0b = gb.dState0?.M;
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["dk (KDA's dv)", ga.dk, gb.dv], ["dv (KDA's dk)", ga.dv, gb.dk], ["dalpha", ga.dalpha, gb.dalpha], ["dtheta", ga.dtheta, gb.dtheta],
    ["dM_0 (KDA's transposed)", ga.dState0?.M, dM0b === undefined ? undefined : transposed(dtype, dM0b.data, 0, d)],
  ];
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(p.data[i], r.data[i])) return `${name}[${i}] = ${p.data[i]}, KDA gives ${r.data[i]}`;
  }
  return null;
}
