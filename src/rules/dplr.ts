/**
 * The generalized delta rule with a diagonal-plus-low-rank transition, DPLR
 * (docs/spec/titans-family.md#dplr): a per-key-channel decay (a channel gate α, w_t = 1 − α_t)
 * plus a rank-one term read from the undecayed memory along a_t and written along b_t:
 *   u_t = M_t a_t ;  M_{t+1} = M_t diag(w_t) + u_t b_tᵀ + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * a, b are the auxiliary inputs X W_Aᵀ, X W_Bᵀ (auxInputs, L2-normalised as k is). IPLR is declared
 * here as the same pair without the decay (iplrInner: w_t = 1, no gate); the invariant below
 * checks it is DPLR at α = 0, bitwise. RWKV-7's recurrence is DPLR. Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { delta } from "./delta.ts";
import { gated_delta } from "./gated_delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { dplrLongInputs } from "./long-inputs.ts";
import { randTensor, unitRows } from "./matrix.ts";
import type { InnerInputs, InnerPair, RuleDecl } from "./types.ts";

/** The inner pair, with the per-channel decay (DPLR) or without (IPLR). */
function lowRankPair(decay: boolean): InnerPair<string> {
  return {
    saved: ["mStates", "u"],
    forward({ k, v, q, a, b, alpha }, state, cfg) {
      const { d, seq_len: s } = cfg;
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const u = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.matvec(mStates, mt, d, d, a!.data, o, u, o); // u_t = M_t a_t, from the undecayed memory
        if (decay) for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) mStates[mn + i * d + j] = (1 - alpha!.data[o + j]!) * mStates[mt + i * d + j]!;
        else mStates.copyWithin(mn, mt, mt + dd);
        K.addOuter(mStates, mn, d, d, 1, u, o, b!.data, o);
        K.addOuter(mStates, mn, d, d, 1, v.data, o, k.data, o);
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      const dt = k.dtype;
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates), u: new Tensor(dt, [s, d], u) },
      };
    },
    backward({ mStates, u }, { k, v, q, a, b, alpha }, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg;
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, U = u!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d), da = alloc(dt, s * d), db = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const du = accBuffer(d), col = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        // the writes v kᵀ and u bᵀ: dv = D k, dk = Dᵀ v ; du = D b, db = Dᵀ u
        K.matvec(D, 0, d, d, k.data, o, dv, o);
        K.matTvec(D, 0, d, d, v.data, o, dk, o);
        K.matvec(D, 0, d, d, b!.data, o, du, 0);
        K.matTvec(D, 0, d, d, U, o, db, o);
        // the read u = M_t a: da = M_tᵀ du ; ∂/∂M_t gets du aᵀ
        K.matTvec(M, mt, d, d, du, 0, da, o);
        if (decay) {
          // the decay M_t diag(w): dα_j = −Σ_i D_ij (M_t)_ij ; ∂L/∂M_t = D diag(w) + du aᵀ
          col.fill(0);
          for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) col[j]! += D[i * d + j]! * M[mt + i * d + j]!;
          for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
          for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) D[i * d + j]! *= 1 - alpha!.data[o + j]!;
        }
        K.addOuter(D, 0, d, d, 1, du, 0, a!.data, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        da: new Tensor(dt, [s, d], da), db: new Tensor(dt, [s, d], db),
        ...(decay ? { dalpha: new Tensor(dt, [s, d], dalpha) } : {}),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  };
}

export const dplr: RuleDecl<"dplr"> = {
  key: "dplr",
  sheet: "docs/spec/titans-family.md#dplr",
  hyper: {},
  projection: "memory",
  gates: ["alpha"],
  channelGates: ["alpha"],
  normalizeKQ: true,
  omega: false,
  auxInputs: ["a", "b"],
  stateShapes: delta.stateShapes,
  init: delta.init,
  randomState: delta.randomState,
  frozen: delta.frozen,
  checkMinimums: delta.checkMinimums,
  // M ← M diag(1 − α) + (M a) bᵀ + v kᵀ with independent unit a, b: diag(1 − α) + a bᵀ has spectral radius
  // up to (1 − α) + |bᵀa| > 1 (the f64 reference's y reached 9.9e37 at t = 456 of T = 1000). The long
  // regime draws b near −a instead (docs/spec/titans-family.md#dplr-long).
  longInputs: dplrLongInputs,
  inner: lowRankPair(true),
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#dplr-tests write_read: alpha=0, M_0=0 gives M_1 = v k^T whatever a and b",
      check: (dtype, seed) => writeRead(dplr.inner, dtype, seed),
    },
    {
      name: "IPLR is DPLR without decay",
      spec: "docs/spec/titans-family.md#dplr-tests iplr equals dplr at alpha = 0, bitwise",
      check: (dtype, seed) => iplrIsDplrWithoutDecay(dplr.inner, iplrInner, dtype, seed),
    },
    {
      name: "a channel's decay acts on its key column",
      spec: "docs/spec/titans-family.md#dplr-tests one channel: alpha_t = 1 on key channel c alone, a = k = 0: M_1 is M_0 with column c zeroed",
      check: (dtype, seed) => decayActsOnItsColumn(dplr.inner, dtype, seed),
    },
    {
      name: "Gated Delta at a = -theta w k, b = k",
      spec: "docs/spec/titans-family.md#dplr-tests equal channels, a = -theta (1 - alpha) k, b = k, value theta v: Gated Delta's y, state and every gradient by the chain rule, within 256 units of rounding",
      check: (dtype, seed) => meetsGatedDelta(dplr.inner, dtype, seed),
    },
  ],
};

/**
 * IPLR, the declared case of DPLR without the decay (`M_{t+1} = M_t + u_t b_tᵀ + v_t k_tᵀ`,
 * docs/spec/titans-family.md#dplr-iplr): the same pair with w_t = 1 and no gate. Not a registry
 * rule of its own (decisions.md#iplr-case): the invariant "IPLR is DPLR without decay" ties it to
 * DPLR at α = 0, bitwise.
 */
export const iplrInner: InnerPair<string> = lowRankPair(false);


/** A random case of the pair: unit k, q, a, b; α in (0.05, 0.95) per channel; M_0 random. */
function randomCase(rng: Rng, dtype: DType, d: number, s: number) {
  const inp = {
    k: unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v: randTensor(rng, dtype, [s, d], -1, 1),
    q: unitRows(randTensor(rng, dtype, [s, d], -1, 1)), a: unitRows(randTensor(rng, dtype, [s, d], -1, 1)),
    b: unitRows(randTensor(rng, dtype, [s, d], -1, 1)), alpha: randTensor(rng, dtype, [s, d], 0.05, 0.95),
  };
  return { inp: { ...inp, x: inp.k } as InnerInputs, M0: randTensor(rng, dtype, [d, d], -0.3, 0.3) };
}

/** α = 0, M_0 = 0: M_1 = v kᵀ exactly (u = M_0 a = 0) and y_0 = M_1 q_0, with random a, b, k, v, q. */
export function writeRead(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const d = 4;
  const { inp } = randomCase(new Rng(seed), dtype, d, 1);
  const zero = new Tensor(dtype, [1, d]);
  const r = inner.forward({ ...inp, alpha: zero }, { M: new Tensor(dtype, [d, d]) }, { d, seq_len: 1 });
  const M1 = r.finalState.M!.data;
  const want = new Tensor(dtype, [d, d]);
  K.addOuter(want.data, 0, d, d, 1, inp.v.data, 0, inp.k.data, 0);
  for (let i = 0; i < d * d; i++) if (!Object.is(M1[i], want.data[i])) return `M_1[${i}] = ${M1[i]}, v k^T gives ${want.data[i]}`;
  const y = new Tensor(dtype, [1, d]);
  K.matvec(want.data, 0, d, d, inp.q.data, 0, y.data, 0);
  for (let i = 0; i < d; i++) if (!Object.is(r.y.data[i], y.data[i])) return `y_0[${i}] = ${r.y.data[i]}, M_1 q_0 gives ${y.data[i]}`;
  return null;
}

/**
 * decay = none (IPLR) against decay = channel (DPLR) at α = 0 on a random case with a random
 * initial state: y, the final state and every gradient (dk, dv, dq, da, db, dM_0) bitwise; the
 * IPLR pair returns no dα (α is not read). Returns null when they agree.
 */
export function iplrIsDplrWithoutDecay(plr: InnerPair<string>, ipl: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const { inp, M0 } = randomCase(rng, dtype, d, s);
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const i0 = { ...inp, alpha: new Tensor(dtype, [s, d]) };
  const cfg = { d, seq_len: s };
  const A = plr.forward(i0, { M: M0 }, cfg), B = ipl.forward(i0, { M: M0 }, cfg);
  const gA = plr.backward(A.saved, i0, dy, cfg, { M: dM }), gB = ipl.backward(B.saved, i0, dy, cfg, { M: dM });
  if (gB.dalpha !== undefined) return "IPLR returned a dalpha: alpha is not one of its inputs";
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", A.y, B.y], ["M_s", A.finalState.M, B.finalState.M], ["dk", gA.dk, gB.dk], ["dv", gA.dv, gB.dv], ["dq", gA.dq, gB.dq],
    ["da", gA.da, gB.da], ["db", gA.db, gB.db], ["dM_0", gA.dState0?.M, gB.dState0?.M],
  ];
  for (const [name, x, r] of pairs) {
    if (x === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(x.data[i], r.data[i])) return `${name}[${i}]: DPLR at alpha = 0 gives ${x.data[i]}, IPLR ${r.data[i]}`;
  }
  return null;
}

/** α_0 = 1 on key channel c alone, a_0 = k_0 = 0 from a random M_0: M_1 is M_0 with column c zeroed, the rest bitwise. */
export function decayActsOnItsColumn(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 6;
  const c = rng.int(0, d - 1);
  const { inp } = randomCase(rng, dtype, d, 1);
  const alpha = new Tensor(dtype, [1, d]);
  alpha.data[c] = 1;
  const M0 = randTensor(rng, dtype, [d, d], 0.1, 1);
  const zero = new Tensor(dtype, [1, d]);
  const r = inner.forward({ ...inp, a: zero, k: zero, alpha }, { M: M0 }, { d, seq_len: 1 });
  const M1 = r.finalState.M!.data;
  for (let i = 0; i < d; i++) {
    for (let j = 0; j < d; j++) {
      const want = j === c ? 0 : M0.data[i * d + j]!;
      if (!Object.is(M1[i * d + j], want)) return `decay on channel ${c}: M_1[${i}][${j}] = ${M1[i * d + j]}, expected ${want}`;
    }
  }
  return null;
}

/**
 * DPLR meets Gated Delta: with α_t on every channel, a_t = −θ_t (1 − α_t) k_t, b_t = k_t and the
 * value θ_t v_t, DPLR's update is Gated Delta's. On a random case with a random initial state,
 * y, the final state and dq, dM_0 agree, and so do Gated Delta's dk, dv, dθ and dα with DPLR's
 * gradients carried through that map (dk + (−θ w) da + db; θ dv; Σ v·dv − w Σ k·da; Σ_j dα_j + θ Σ k·da),
 * each within `units` (256) units of rounding of the tensor's scale: seeds 1-300 needed at most
 * 10.1 (f64) and 4.4 (f32). Returns null when they do.
 */
export function meetsGatedDelta(inner: InnerPair<string>, dtype: DType, seed: number, units = 256): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v = randTensor(rng, dtype, [s, d], -1, 1);
  const q = unitRows(randTensor(rng, dtype, [s, d], -1, 1));
  const alpha = randTensor(rng, dtype, [s], 0.05, 0.95), theta = randTensor(rng, dtype, [s], 0.05, 0.9);
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const cfg = { d, seq_len: s };
  const map = (f: (t: number, j: number) => number) => {
    const out = new Tensor(dtype, [s, d]);
    for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) out.data[t * d + j] = f(t, j);
    return out;
  };
  const th = (t: number) => theta.data[t]!, w = (t: number) => 1 - alpha.data[t]!;
  const pin = {
    k, q, x: k, b: k, v: map((t, j) => th(t) * v.data[t * d + j]!), a: map((t, j) => -th(t) * w(t) * k.data[t * d + j]!),
    alpha: map((t) => alpha.data[t]!),
  };
  const gin = { k, v, q, x: k, alpha, theta };
  const A = inner.forward(pin, { M: M0 }, cfg), B = gated_delta.inner.forward(gin, { M: M0 }, cfg);
  const gA = inner.backward(A.saved, pin, dy, cfg, { M: dM }), gB = gated_delta.inner.backward(B.saved, gin, dy, cfg, { M: dM });
  const dk = map((t, j) => gA.dk!.data[t * d + j]! - th(t) * w(t) * gA.da!.data[t * d + j]! + gA.db!.data[t * d + j]!);
  const dv = map((t, j) => th(t) * gA.dv!.data[t * d + j]!);
  const dtheta = new Tensor(dtype, [s]), dalpha = new Tensor(dtype, [s]);
  for (let t = 0; t < s; t++) {
    let sv = 0, ska = 0, sa = 0;
    for (let j = 0; j < d; j++) {
      const o = t * d + j;
      sv += v.data[o]! * gA.dv!.data[o]!;
      ska += k.data[o]! * gA.da!.data[o]!;
      sa += gA.dalpha!.data[o]!;
    }
    dtheta.data[t] = sv - w(t) * ska;
    dalpha.data[t] = sa + th(t) * ska;
  }
  const eps = dtype === "f32" ? 2 ** -23 : 2 ** -52;
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", A.y, B.y], ["M_s", A.finalState.M, B.finalState.M], ["dq", gA.dq, gB.dq], ["dM_0", gA.dState0?.M, gB.dState0?.M],
    ["dk", dk, gB.dk], ["dv", dv, gB.dv], ["dtheta", dtheta, gB.dtheta], ["dalpha", dalpha, gB.dalpha],
  ];
  for (const [name, x, r] of pairs) {
    if (x === undefined || r === undefined) return `${name} missing`;
    let scale = 0;
    for (let i = 0; i < r.size; i++) scale = Math.max(scale, Math.abs(r.data[i]!));
    if (scale === 0) return `${name} is zero: the comparison would be vacuous`;
    for (let i = 0; i < r.size; i++) {
      if (!(Math.abs(x.data[i]! - r.data[i]!) <= units * eps * scale)) return `${name}[${i}]: DPLR gives ${x.data[i]}, Gated Delta ${r.data[i]}`;
    }
  }
  return null;
}
