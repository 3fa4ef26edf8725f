/**
 * Titans LMM (docs/spec/titans-family.md#titans-forward, docs/spec/titans-family.md#titans-backward): linear matrix memory, EMA momentum, L2
 * attentional bias (D7, D9), read after write.
 *   e_t = M_t k_t − v_t ;  G_t = e_t k_tᵀ
 *   S_{t+1} = η_t S_t − θ_t G_t ;  M_{t+1} = (1 − α_t) M_t + S_{t+1} ;  y_t = M_{t+1} q_t
 * k and q are L2-normalised by the level (D1). S_0 is the caller's S: zeros at the model
 * level (D7), any matrix in a rule-level case. No m_norm clamp, no error clip (D7).
 * Frozen read: y_t = M q_t (§6).
 */
import { accBuffer } from "../precision.ts";
import { Rng, uniformTensor } from "../rng.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros, type Data } from "../tensor.ts";
import { delta } from "./delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { matrixFrozenRead, randomMatrixState } from "./matrix.ts";
import type { InnerInputs, RuleDecl } from "./types.ts";

/**
 * The write of token t from its error e_t (already in e): S_{t+1} = η S_t − θ e kᵀ in the accumulate
 * dtype (sNext), then M_{t+1} = (1−α)M_t + S_{t+1}. Shared with the chunk-start form, whose e_t reads
 * the chunk's first state instead of M_t.
 */
export function titansWrite(M: Data, S: Data, t: number, d: number, e: Data, k: Data, a: number, th: number, et: number,
  sNext: Data): void {
  const dd = d * d, mt = t * dd, mn = (t + 1) * dd, o = t * d;
  for (let i = 0; i < d; i++) {
    const gi = -th * e[o + i]!;
    for (let j = 0; j < d; j++) sNext[i * d + j] = et * S[mt + i * d + j]! + gi * k[o + j]!;
  }
  // (1−α)M_t is rounded to the state dtype before the (still f64) S_{t+1} is added,
  // the same two roundings Delta makes, so η = 0 reproduces Delta bit for bit in f32 too.
  for (let i = 0; i < dd; i++) {
    M[mn + i] = (1 - a) * M[mt + i]!;
    M[mn + i]! += sNext[i]!;
  }
  S.set(sNext, mn);
}

/** Per-token input gradients, written row by row by titansTokenBackward. */
export interface TitansTokenGrads { dk: Data; dv: Data; dq: Data; dalpha: Data; dtheta: Data; deta: Data }

export type TitansScratch = ReturnType<typeof titansScratch>;

export function titansScratch(d: number) {
  return { ek: accBuffer(d), ete: accBuffer(d), de: accBuffer(d), tmp: accBuffer(d) };
}

/**
 * Exact backward of token t. D = ∂L/∂M_{t+1} and E = ∂L/∂S_{t+1} on entry, ∂L/∂M_t and ∂L/∂S_t on exit
 * except for the prediction's term de kᵀ, which goes to F: D itself in the rule; in the chunk form, an
 * accumulator for the chunk's first state, which the error e_t = M_e k_t − v_t reads (token e).
 * E = null is the same step without momentum (the chunk form's Delta: η = 0, all of D reaches the write).
 */
export function titansTokenBackward(M: Data, S: Data | null, Ev: Data, { k, q, alpha, theta, eta }: InnerInputs, dy: Tensor,
  d: number, t: number, e: number, D: Data, E: Data | null, F: Data, sc: TitansScratch, g: TitansTokenGrads): void {
  const { ek, ete, de, tmp } = sc;
  const dd = d * d, mt = t * dd, mn = (t + 1) * dd, me = e * dd, o = t * d;
  const a = alpha!.data[t]!, th = theta!.data[t]!;
  // read y_t = M_{t+1} q_t
  K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
  K.matTvec(M, mn, d, d, dy.data, o, tmp, 0);
  for (let j = 0; j < d; j++) g.dq[o + j] = tmp[j]!;
  g.dalpha[t] = -K.frob(D, 0, M, mt, dd);
  // M_{t+1} = (1−α)M_t + S_{t+1}: S_{t+1} receives all of D; the write −θ G_t then receives G = E
  // (without momentum the write is in M_{t+1} itself: G = D)
  let G = D;
  if (E !== null) {
    for (let i = 0; i < dd; i++) E[i]! += D[i]!;
    // EMA: dη = ⟨S_t, E⟩
    g.deta[t] = K.frob(S!, mt, E, 0, dd);
    G = E;
  }
  // dθ = −⟨G_t, E⟩ = −eᵀ E k
  K.matvec(G, 0, d, d, k.data, o, ek, 0);
  g.dtheta[t] = -K.dot(Ev, ek, d, o, 0);
  // dG = −θ E:  de = dG k = −θ E k ;  dk = dGᵀ e = −θ Eᵀ e
  for (let i = 0; i < d; i++) {
    de[i] = -th * ek[i]!;
    g.dv[o + i] = -de[i]!;
  }
  K.matTvec(G, 0, d, d, Ev, o, ete, 0);
  // prediction M_e k_t: ∂/∂k += M_eᵀ de, ∂/∂M_e += de kᵀ (into F)
  K.matTvec(M, me, d, d, de, 0, tmp, 0);
  for (let j = 0; j < d; j++) g.dk[o + j] = -th * ete[j]! + tmp[j]!;
  for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
  if (E !== null) {
    const et = eta!.data[t]!;
    for (let i = 0; i < dd; i++) E[i]! *= et;
  }
  K.addOuter(F, 0, d, d, 1, de, 0, k.data, o);
}

export const titans: RuleDecl<"titans"> = {
  key: "titans",
  sheet: "docs/spec/titans-family.md#titans",
  hyper: {},
  projection: "memory",
  gates: ["alpha", "theta", "eta"],
  normalizeKQ: true,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d], S: [d, d] }),
  init: ({ d }, dtype) => ({ M: zeros(dtype, [d, d]), S: zeros(dtype, [d, d]) }),
  randomState: randomMatrixState(["M", "S"]),
  inner: {
    saved: ["mStates", "sStates", "e"],
    forward({ k, v, q, alpha, theta, eta }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const sStates = alloc(dt, (s + 1) * dd);
      sStates.set(state.S!.data);
      const e = alloc(dt, s * d);
      const y = alloc(dt, s * d);
      const sNext = accBuffer(dd);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.matvec(mStates, mt, d, d, k.data, o, e, o);
        for (let i = 0; i < d; i++) e[o + i]! -= v.data[o + i]!;
        titansWrite(mStates, sStates, t, d, e, k.data, alpha!.data[t]!, theta!.data[t]!, eta!.data[t]!, sNext);
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
          e: new Tensor(dt, [s, d], e),
        },
      };
    },
    backward({ mStates, sStates, e }, inp, dy, { d, seq_len: s }, dFinal) {
      const dt = inp.k.dtype, dd = d * d;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s), deta = alloc(dt, s);
      const out: TitansTokenGrads = { dk, dv, dq, dalpha, dtheta, deta };
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const E = adjointFrom(dFinal, "S", dd); // ∂L/∂S_{t+1}; after t = 0, ∂L/∂S_0
      const scratch = titansScratch(d);
      // the error reads M_t, so its adjoint joins D at once (F = D)
      for (let t = s - 1; t >= 0; t--) titansTokenBackward(mStates!.data, sStates!.data, e!.data, inp, dy, d, t, t, D, E, D, scratch, out);
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta), deta: new Tensor(dt, [s], deta),
        dState0: { M: gradTensor(dt, [d, d], D), S: gradTensor(dt, [d, d], E) },
      };
    },
  },
  frozen: matrixFrozenRead,
  matrixChunk: { write: "error", momentum: true },
  // d = 1: a normalised key or query is the constant ±1; s = 1 from zero states: alpha and eta never act.
  checkMinimums: { d: 2, seq_len: 2 },
  stepLocalState: ["S"],
  invariants: [
    {
      name: "eta = 0 equals Delta",
      spec: "docs/spec/titans-family.md#titans-forward: Delta is the special case eta = 0 (S_{t+1} = -theta G, M_{t+1} = (1-alpha)M - theta G)",
      check(dtype, seed) {
        const d = 5, s = 6;
        const rng = new Rng(seed);
        const k = uniformTensor(dtype, [s, d], rng, -1, 1), v = uniformTensor(dtype, [s, d], rng, -1, 1);
        const q = uniformTensor(dtype, [s, d], rng, -1, 1);
        const alpha = uniformTensor(dtype, [s], rng, 0.05, 0.95), theta = uniformTensor(dtype, [s], rng, 0.05, 0.9);
        const eta = zeros(dtype, [s]);
        // η S_t vanishes for any S_t, so M_0 and S_0 need not be zero: random ones make the check stronger.
        const M0 = uniformTensor(dtype, [d, d], rng, -0.3, 0.3), S0 = uniformTensor(dtype, [d, d], rng, -0.3, 0.3);
        const cfg = { d, seq_len: s };
        const rt = titans.inner.forward({ k, v, q, x: k, alpha, theta, eta }, { M: M0, S: S0 }, cfg);
        const rd = delta.inner.forward({ k, v, q, x: k, alpha, theta }, { M: M0 }, cfg);
        return firstDiff("y", rt.y.data, rd.y.data) ?? firstDiff("final M", rt.finalState.M!.data, rd.finalState.M!.data);
      },
    },
  ],
};


function firstDiff(what: string, a: ArrayLike<number>, b: ArrayLike<number>): string | null {
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) return `${what}[${i}]: titans(eta=0) ${a[i]} vs delta ${b[i]}`;
  }
  return null;
}
