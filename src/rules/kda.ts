/**
 * KDA, Kimi Delta Attention (docs/spec/titans-family.md#kda): Gated Delta with a decay per key
 * channel. α_t is a channel gate ([s, d], types.ts gateShape), a_t = 1 − α_t:
 *   M̃_t = M_t diag(a_t) ;  e_t = M̃_t k_t − v_t ;  M_{t+1} = M̃_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * M is [d_v, d_k] (M k predicts v), so the key channels are M's columns. With every channel of α_t
 * equal it is Gated Delta (gated_delta.ts); the invariant below checks it bitwise. k and q are
 * L2-normalised by the level (D1). Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { gated_delta } from "./gated_delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { randTensor, unitRows, writeReadIdentity } from "./matrix.ts";
import type { InnerPair, RuleDecl } from "./types.ts";

export const kda: RuleDecl<"kda"> = {
  key: "kda",
  sheet: "docs/spec/titans-family.md#kda",
  // what it shares with Gated Delta (docs/spec/titans-family.md#kda-params): parameters (α's per
  // channel), the state M [d, d] and its initial and random values, the frozen read, the minimums
  hyper: gated_delta.hyper,
  projection: gated_delta.projection,
  gates: gated_delta.gates,
  channelGates: ["alpha"],
  normalizeKQ: gated_delta.normalizeKQ,
  omega: gated_delta.omega,
  stateShapes: gated_delta.stateShapes,
  init: gated_delta.init,
  randomState: gated_delta.randomState,
  frozen: gated_delta.frozen,
  checkMinimums: gated_delta.checkMinimums,
  inner: {
    saved: ["mStates", "e"],
    forward({ k, v, q, alpha, theta }, state, { d, seq_len: s }) {
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const e = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      const A = alpha!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const th = theta!.data[t]!;
        // M̃_t = M_t diag(1 − α_t): column j (key channel j) keeps 1 − α_{t,j}; in place of M_{t+1}
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) mStates[mn + i * d + j] = (1 - A[o + j]!) * mStates[mt + i * d + j]!;
        K.matvec(mStates, mn, d, d, k.data, o, e, o);
        for (let i = 0; i < d; i++) e[o + i]! -= v.data[o + i]!;
        K.addOuter(mStates, mn, d, d, -th, e, o, k.data, o);
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
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
      const M = mStates!.data, E = e!.data, A = alpha!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d), dtheta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const de = accBuffer(d), tmp = accBuffer(d), col = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        const th = theta!.data[t]!;
        // dθ = −⟨D, e kᵀ⟩ = −eᵀ D k
        K.matvec(D, 0, d, d, k.data, o, de, 0);
        dtheta[t] = -K.dot(E, de, d, o, 0);
        // the write −θ e kᵀ: de = −θ D k ; dk = −θ Dᵀ e
        for (let i = 0; i < d; i++) de[i]! *= -th;
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -th * tmp[j]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
        // the prediction M̃_t k_t with M̃_t = M_t diag(a_t): ∂/∂k += diag(a_t) M_tᵀ de, ∂/∂M̃_t = D + de kᵀ
        K.matTvec(M, mt, d, d, de, 0, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j]! += (1 - A[o + j]!) * tmp[j]!;
        K.addOuter(D, 0, d, d, 1, de, 0, k.data, o);
        // the decay: dα_{t,j} = −Σ_i (∂L/∂M̃_t)_{ij} (M_t)_{ij} ; ∂L/∂M_t = ∂L/∂M̃_t diag(a_t)
        col.fill(0);
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) col[j]! += D[i * d + j]! * M[mt + i * d + j]!;
        for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) D[i * d + j]! *= 1 - A[o + j]!;
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
      spec: "docs/spec/titans-family.md#kda-tests write_read: alpha=0 on every channel, theta=1, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(kda.inner, dtype, { alpha: 0, theta: 1 }, ["alpha"]),
    },
    {
      name: "Gated Delta at equal channels",
      spec: "docs/spec/titans-family.md#kda-tests with every channel of alpha_t equal KDA is Gated Delta, bitwise but for dalpha, whose channel sum is Gated Delta's dalpha",
      check: (dtype, seed) => equalsScalarRuleAtEqualChannels(kda.inner, gated_delta.inner, "Gated Delta", dtype, seed),
    },
    {
      name: "a channel's decay acts on its key column",
      spec: "docs/spec/titans-family.md#kda-tests one channel: alpha_t = 1 on key channel c alone, theta = 0: M_1 is M_0 with column c zeroed, the others bitwise M_0's",
      check: (dtype, seed) => channelDecayActsOnItsColumn(kda.inner, dtype, seed),
    },
  ],
};


/**
 * With α_{t,j} = α_t on every channel a channel-gated rule (`inner`) is its scalar-gated form
 * (`scalar`: KDA's Gated Delta, GLA's Hebbian): y, the final state and every gradient the scalar
 * form returns but dα must agree bitwise on a random case with a random initial state; dα_t's
 * channel sum is the scalar dα_t up to rounding (the same terms, summed by column first): within 16
 * ulps of the sum of their magnitudes. Returns null when they do.
 */
export function equalsScalarRuleAtEqualChannels(inner: InnerPair<string>, scalar: InnerPair<string>, scalarName: string,
  dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v = randTensor(rng, dtype, [s, d], -1, 1);
  const q = unitRows(randTensor(rng, dtype, [s, d], -1, 1));
  const alpha = randTensor(rng, dtype, [s], 0.05, 0.95), theta = randTensor(rng, dtype, [s], 0.05, 0.9);
  const alphaC = new Tensor(dtype, [s, d]);
  for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) alphaC.data[t * d + j] = alpha.data[t]!;
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const cfg = { d, seq_len: s };
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const gi = { k, v, q, x: k, alpha, theta }, ki = { ...gi, alpha: alphaC };
  const a = inner.forward(ki, { M: M0 }, cfg);
  const b = scalar.forward(gi, { M: M0 }, cfg);
  const ga = inner.backward(a.saved, ki, dy, cfg, { M: dM });
  const gb = scalar.backward(b.saved, gi, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M], ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const name of ["dk", "dv", "dq", "dtheta"] as const) if (gb[name] !== undefined) pairs.push([name, ga[name], gb[name]]);
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(p.data[i], r.data[i])) return `${name}[${i}] = ${p.data[i]}, ${scalarName} gives ${r.data[i]}`;
  }
  const eps = dtype === "f32" ? 2 ** -23 : 2 ** -52;
  for (let t = 0; t < s; t++) {
    let sum = 0, mag = 0;
    for (let j = 0; j < d; j++) {
      sum += ga.dalpha!.data[t * d + j]!;
      mag += Math.abs(ga.dalpha!.data[t * d + j]!);
    }
    const want = gb.dalpha!.data[t]!;
    if (!(Math.abs(sum - want) <= 16 * eps * Math.max(mag, Math.abs(want)))) return `dalpha[${t}] summed over channels = ${sum}, ${scalarName} gives ${want}`;
    if (mag === 0) return `dalpha[${t}] is zero on every channel: the comparison would be vacuous`;
  }
  return null;
}

/**
 * α_0 = 1 on key channel c alone (the others 0), θ_0 = 0 and v_0 = 0 (no write, for KDA and for
 * GLA) from a random M_0: M_1 is M_0 with column c zeroed and every other entry M_0's, bitwise; c
 * is drawn from the seed.
 */
export function channelDecayActsOnItsColumn(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 6;
  const c = rng.int(0, d - 1);
  const k = unitRows(randTensor(rng, dtype, [1, d], -1, 1)), v = new Tensor(dtype, [1, d]);
  const q = unitRows(randTensor(rng, dtype, [1, d], -1, 1));
  const alpha = new Tensor(dtype, [1, d]);
  alpha.data[c] = 1;
  const M0 = randTensor(rng, dtype, [d, d], 0.1, 1);
  // θ zero on every channel: a token gate reads its first entry, a channel gate (RWKV-6's bonus) all d
  const r = inner.forward({ k, v, q, x: k, alpha, theta: new Tensor(dtype, [1, d]) }, { M: M0 }, { d, seq_len: 1 });
  const M1 = r.finalState.M!.data;
  for (let i = 0; i < d; i++) {
    for (let j = 0; j < d; j++) {
      const want = j === c ? 0 : M0.data[i * d + j]!;
      if (!Object.is(M1[i * d + j], want)) return `decay on channel ${c}: M_1[${i}][${j}] = ${M1[i * d + j]}, expected ${want}`;
    }
  }
  return null;
}
