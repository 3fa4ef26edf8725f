/**
 * Gated Delta rule (docs/spec/titans-family.md#gated-delta): decay, then correct the decayed memory.
 *   M̃_t = (1 − α_t) M_t ;  e_t = M̃_t k_t − v_t ;  M_{t+1} = M̃_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * i.e. M_{t+1} = (1 − α_t) M_t (I − θ_t k_t k_tᵀ) + θ_t v_t k_tᵀ, Gated DeltaNet with decay
 * a_t = 1 − α_t and step β_t = θ_t. Delta (delta.ts) corrects from the undecayed M_t instead; at
 * α = 0 the two are the same function (the invariant below checks it bitwise). k and q are
 * L2-normalised by the level (D1). Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type DType } from "../tensor.ts";
import { delta } from "./delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { writeReadIdentity } from "./matrix.ts";
import type { RuleDecl } from "./types.ts";

export const gated_delta: RuleDecl<"gated_delta"> = {
  key: "gated_delta",
  sheet: "docs/spec/titans-family.md#gated-delta",
  // what it shares with Delta (docs/spec/titans-family.md#gated-delta-params): parameters, gates,
  // the state M [d, d] and its initial and random values, the frozen read and the check minimums
  hyper: delta.hyper,
  projection: delta.projection,
  gates: delta.gates,
  normalizeKQ: delta.normalizeKQ,
  omega: delta.omega,
  stateShapes: delta.stateShapes,
  init: delta.init,
  randomState: delta.randomState,
  frozen: delta.frozen,
  checkMinimums: delta.checkMinimums,
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
        const a = alpha!.data[t]!, th = theta!.data[t]!;
        for (let i = 0; i < dd; i++) mStates[mn + i] = (1 - a) * mStates[mt + i]!; // M̃_t, in place of M_{t+1}
        K.matvec(mStates, mn, d, d, k.data, t * d, e, t * d);
        for (let i = 0; i < d; i++) e[t * d + i]! -= v.data[t * d + i]!;
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
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        const th = theta!.data[t]!, a = alpha!.data[t]!;
        // dθ = −⟨D, e kᵀ⟩ = −eᵀ D k
        K.matvec(D, 0, d, d, k.data, o, de, 0);
        dtheta[t] = -K.dot(E, de, d, o, 0);
        // the write −θ e kᵀ: de = −θ D k ; dk = −θ Dᵀ e
        for (let i = 0; i < d; i++) de[i]! *= -th;
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -th * tmp[j]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
        // the prediction M̃_t k_t with M̃_t = (1 − α_t) M_t: ∂/∂k += M̃_tᵀ de, ∂/∂M̃_t = D + de kᵀ
        K.matTvec(M, mt, d, d, de, 0, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j]! += (1 - a) * tmp[j]!;
        K.addOuter(D, 0, d, d, 1, de, 0, k.data, o);
        // the decay: dα = −⟨∂L/∂M̃_t, M_t⟩ ; ∂L/∂M_t = (1 − α_t) ∂L/∂M̃_t
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#gated-delta-tests write_read: alpha=0, theta=1, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(gated_delta.inner, dtype, { alpha: 0, theta: 1 }),
    },
    {
      name: "Delta at alpha = 0",
      spec: "docs/spec/titans-family.md#gated-delta-tests with alpha = 0 Gated Delta is Delta (DeltaNet), bitwise",
      check: (dtype, seed) => equalsDeltaWithoutDecay(dtype, seed),
    },
  ],
};

/**
 * At α = 0 the decay is the identity and Gated Delta is Delta: y, the final state and every
 * gradient but dα (which differs by construction: the decay acts on M̃_t, Delta's on M_t) must
 * agree bitwise on a random case with a random initial state. Returns null when they do.
 */
function equalsDeltaWithoutDecay(dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const rand = (shape: number[], lo: number, hi: number) => {
    const t = new Tensor(dtype, shape);
    for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
    return t;
  };
  const unitRows = (t: Tensor) => {
    for (let r = 0; r < s; r++) {
      let n = 0;
      for (let i = 0; i < d; i++) n += t.data[r * d + i]! ** 2;
      for (let i = 0; i < d; i++) t.data[r * d + i]! /= Math.sqrt(n);
    }
    return t;
  };
  const inp = {
    k: unitRows(rand([s, d], -1, 1)), v: rand([s, d], -1, 1), q: unitRows(rand([s, d], -1, 1)),
    alpha: zeros(dtype, [s]), theta: rand([s], 0.05, 0.9),
  };
  const x = inp.k;
  const M0 = rand([d, d], -0.3, 0.3);
  const cfg = { d, seq_len: s };
  const dy = rand([s, d], -1, 1), dM = rand([d, d], -1, 1);
  const a = gated_delta.inner.forward({ ...inp, x }, { M: M0 }, cfg);
  const b = delta.inner.forward({ ...inp, x }, { M: M0 }, cfg);
  const ga = gated_delta.inner.backward(a.saved, { ...inp, x }, dy, cfg, { M: dM });
  const gb = delta.inner.backward(b.saved, { ...inp, x }, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M],
    ["dk", ga.dk, gb.dk], ["dv", ga.dv, gb.dv], ["dq", ga.dq, gb.dq], ["dtheta", ga.dtheta, gb.dtheta],
    ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(p.data[i], r.data[i])) return `${name}[${i}] = ${p.data[i]}, Delta gives ${r.data[i]}`;
  }
  return null;
}
