/**
 * GDN2, Gated DeltaNet 2 (docs/spec/delta-family-2.md#gdn2): KDA with the step split into an erase
 * gate per key channel and a write gate per value channel. All three gates are channel gates
 * ([s, d], types.ts gateShape): α_t the decay (a_t = 1 − α_t), θ_t the erase gate b_t, η_t the write
 * gate w_t (docs/spec/decisions.md#gdn2-gates):
 *   M̃_t = M_t diag(a_t) ;  e_t = M̃_t (θ_t ⊙ k_t) − η_t ⊙ v_t ;  M_{t+1} = M̃_t − e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * With θ_t = η_t = β_t on every channel it is KDA with step β_t (kda.ts); the invariant below checks
 * it bitwise. k and q are L2-normalised by the level (D1). Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type DType } from "../tensor.ts";
import { kda } from "./kda.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { randTensor, unitRows, writeReadIdentity } from "./matrix.ts";
import type { InnerPair, RuleDecl } from "./types.ts";

export const gdn2: RuleDecl<"gdn2"> = {
  key: "gdn2",
  sheet: "docs/spec/delta-family-2.md#gdn2",
  // what it shares with KDA (docs/spec/delta-family-2.md#gdn2-params): the state M [d, d] and its
  // initial and random values, the frozen read, the minimums; its gates are all per channel
  hyper: kda.hyper,
  projection: kda.projection,
  gates: ["alpha", "theta", "eta"],
  channelGates: ["alpha", "theta", "eta"],
  normalizeKQ: kda.normalizeKQ,
  omega: kda.omega,
  stateShapes: kda.stateShapes,
  init: kda.init,
  randomState: kda.randomState,
  frozen: kda.frozen,
  checkMinimums: kda.checkMinimums,
  inner: {
    saved: ["mStates", "e"],
    forward({ k, v, q, alpha, theta, eta }, state, { d, seq_len: s }) {
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const e = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      const bk = accBuffer(d);
      const A = alpha!.data, B = theta!.data, W = eta!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // M̃_t = M_t diag(1 − α_t): column j (key channel j) keeps 1 − α_{t,j}; in place of M_{t+1}
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) mStates[mn + i * d + j] = (1 - A[o + j]!) * mStates[mt + i * d + j]!;
        // the gated read M̃_t (b_t ⊙ k_t), less the gated write w_t ⊙ v_t
        for (let j = 0; j < d; j++) bk[j] = B[o + j]! * k.data[o + j]!;
        K.matvec(mStates, mn, d, d, bk, 0, e, o);
        for (let i = 0; i < d; i++) e[o + i]! -= W[o + i]! * v.data[o + i]!;
        K.addOuter(mStates, mn, d, d, -1, e, o, k.data, o);
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      const dt = k.dtype;
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates), e: new Tensor(dt, [s, d], e) },
      };
    },
    backward({ mStates, e }, { k, v, q, alpha, theta, eta }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, E = e!.data, A = alpha!.data, B = theta!.data, W = eta!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d), dtheta = alloc(dt, s * d), deta = alloc(dt, s * d);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const de = accBuffer(d), tmp = accBuffer(d), col = accBuffer(d), bk = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mt + dd, d, d, dy.data, o, dq, o);
        // the write −e kᵀ: de = ∂L/∂e = −D k ; dk = −Dᵀ e
        K.matvec(D, 0, d, d, k.data, o, de, 0);
        // the gated write w ⊙ v enters e with a minus: ∂L/∂(w ⊙ v) = D k
        for (let i = 0; i < d; i++) {
          dv[o + i] = W[o + i]! * de[i]!;
          deta[o + i] = v.data[o + i]! * de[i]!;
          de[i] = -de[i]!;
        }
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -tmp[j]!;
        // the gated read M̃_t (b ⊙ k) with M̃_t = M_t diag(a_t): ∂/∂(b ⊙ k) = diag(a_t) M_tᵀ de
        K.matTvec(M, mt, d, d, de, 0, tmp, 0);
        for (let j = 0; j < d; j++) {
          const g = (1 - A[o + j]!) * tmp[j]!;
          dk[o + j]! += B[o + j]! * g;
          dtheta[o + j] = k.data[o + j]! * g;
          bk[j] = B[o + j]! * k.data[o + j]!;
        }
        // ∂L/∂M̃_t = D + de (b ⊙ k)ᵀ ; dα_{t,j} = −Σ_i (∂L/∂M̃_t)_{ij} (M_t)_{ij} ; ∂L/∂M_t = ∂L/∂M̃_t diag(a_t)
        K.addOuter(D, 0, d, d, 1, de, 0, bk, 0);
        col.fill(0);
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) col[j]! += D[i * d + j]! * M[mt + i * d + j]!;
        for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) D[i * d + j]! *= 1 - A[o + j]!;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s, d], dalpha), dtheta: new Tensor(dt, [s, d], dtheta), deta: new Tensor(dt, [s, d], deta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/delta-family-2.md#gdn2-tests write_read: alpha=0, theta=eta=1 on every channel, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(gdn2.inner, dtype, { alpha: 0, theta: 1, eta: 1 }, ["alpha", "theta", "eta"]),
    },
    {
      name: "KDA at equal erase and write gates",
      spec: "docs/spec/delta-family-2.md#gdn2-tests with theta_t = eta_t = beta_t on every channel (beta_t a power of two) GDN2 is KDA with step beta_t, bitwise but for dtheta and deta, whose channel sums add up to KDA's dtheta",
      check: (dtype, seed) => equalsKdaAtEqualGates(gdn2.inner, dtype, seed),
    },
    {
      name: "each gate acts on its own channel",
      spec: "docs/spec/delta-family-2.md#gdn2-tests one channel: the erase gate on key channel c alone with k = e_c clears column c of M; the write gate on value channel c alone writes row c only",
      check: (dtype, seed) => gatesActOnTheirChannels(gdn2.inner, dtype, seed),
    },
  ],
};

/**
 * With θ_{t,j} = η_{t,i} = β_t on every channel GDN2 is KDA with θ_t = β_t. β_t is drawn from powers
 * of two, so that β (M̃ k) and M̃ (β k) round alike and the two are the same operations: y, the final
 * state, dk, dv, dq, dα and dM_0 must agree bitwise on a random case with a random initial state;
 * Σ_j dθ_{t,j} + Σ_i dη_{t,i} is KDA's dθ_t (the same terms, grouped apart) within 16 ulps of the sum
 * of their magnitudes. Returns null when they do.
 */
export function equalsKdaAtEqualGates(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v = randTensor(rng, dtype, [s, d], -1, 1);
  const q = unitRows(randTensor(rng, dtype, [s, d], -1, 1));
  const alpha = randTensor(rng, dtype, [s, d], 0.05, 0.95);
  const beta = new Tensor(dtype, [s]), betaC = new Tensor(dtype, [s, d]);
  for (let t = 0; t < s; t++) {
    beta.data[t] = 2 ** -rng.int(1, 3);
    for (let j = 0; j < d; j++) betaC.data[t * d + j] = beta.data[t]!;
  }
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const cfg = { d, seq_len: s };
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const gi = { k, v, q, x: k, alpha, theta: betaC, eta: betaC }, ki = { k, v, q, x: k, alpha, theta: beta };
  const a = inner.forward(gi, { M: M0 }, cfg);
  const b = kda.inner.forward(ki, { M: M0 }, cfg);
  const ga = inner.backward(a.saved, gi, dy, cfg, { M: dM });
  const gb = kda.inner.backward(b.saved, ki, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M], ["dk", ga.dk, gb.dk], ["dv", ga.dv, gb.dv],
    ["dq", ga.dq, gb.dq], ["dalpha", ga.dalpha, gb.dalpha], ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(p.data[i], r.data[i])) return `${name}[${i}] = ${p.data[i]}, KDA gives ${r.data[i]}`;
  }
  if (ga.dtheta === undefined || ga.deta === undefined || gb.dtheta === undefined) return "dtheta or deta missing";
  const eps = dtype === "f32" ? 2 ** -23 : 2 ** -52;
  for (let t = 0; t < s; t++) {
    let sum = 0, mag = 0;
    for (let j = 0; j < d; j++) {
      for (const g of [ga.dtheta, ga.deta]) {
        sum += g.data[t * d + j]!;
        mag += Math.abs(g.data[t * d + j]!);
      }
    }
    const want = gb.dtheta.data[t]!;
    if (!(Math.abs(sum - want) <= 16 * eps * Math.max(mag, Math.abs(want)))) return `dtheta[${t}] + deta[${t}] summed over channels = ${sum}, KDA's dtheta is ${want}`;
    if (mag === 0) return `dtheta[${t}] and deta[${t}] are zero on every channel: the comparison would be vacuous`;
  }
  return null;
}

/**
 * The channel indexing the equal-gate invariant cannot see (gates read from reversed channels pass
 * it), on one token with α = 0 and c drawn from the seed:
 *  - erase: k = e_c, θ = 1 on key channel c alone (0 elsewhere), η = 0, from a random M_0: M_1 is
 *    M_0 with column c zeroed, every other entry bitwise M_0's;
 *  - write: θ = 0, η = 1 on value channel c alone, k = e_0, from M_0 = 0: M_1 is v_c at (c, 0) and
 *    zero elsewhere.
 */
export function gatesActOnTheirChannels(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 6, cfg = { d, seq_len: 1 };
  const c = rng.int(0, d - 1);
  const v = randTensor(rng, dtype, [1, d], 0.1, 1), q = unitRows(randTensor(rng, dtype, [1, d], -1, 1));
  const alpha = zeros(dtype, [1, d]), oneHot = zeros(dtype, [1, d]);
  oneHot.data[c] = 1;
  const M0 = randTensor(rng, dtype, [d, d], 0.1, 1);
  const erased = inner.forward({ k: oneHot, v, q, x: oneHot, alpha, theta: oneHot, eta: zeros(dtype, [1, d]) }, { M: M0 }, cfg).finalState.M!.data;
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) {
    const want = j === c ? 0 : M0.data[i * d + j]!;
    if (erased[i * d + j] !== want) return `erase gate on key channel ${c}: M_1[${i}][${j}] = ${erased[i * d + j]}, expected ${want}`;
  }
  const e0 = zeros(dtype, [1, d]);
  e0.data[0] = 1;
  const written = inner.forward({ k: e0, v, q, x: e0, alpha, theta: zeros(dtype, [1, d]), eta: oneHot }, { M: zeros(dtype, [d, d]) }, cfg).finalState.M!.data;
  for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) {
    const want = i === c && j === 0 ? v.data[c]! : 0;
    if (written[i * d + j] !== want) return `write gate on value channel ${c}: M_1[${i}][${j}] = ${written[i * d + j]}, expected ${want}`;
  }
  return null;
}
