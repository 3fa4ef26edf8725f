/**
 * Gated DeltaProduct's inner pair (docs/spec/titans-family.md#gated-delta-product): per token one
 * decay, then n_h delta steps, each with its own key, value and step, then the read.
 *   M̃_t = (1 − α_t) M_t ;  P_0 = M̃_t ;
 *   for j < n_h:  e_{t,j} = P_j k_{t,j} − v_{t,j} ;  P_{j+1} = P_j − θ_{t,j} e_{t,j} k_{t,j}ᵀ
 *   M_{t+1} = P_{n_h} ;  y_t = M_{t+1} q_t
 * k, v hold n_h rows of d per token and θ n_h values per token, step j of token t at row t·n_h + j
 * (fla's [B, T·n_h, H, d] layout), shaped token-major as [s, n_h·d] and [s, n_h] so that every
 * slicer by token takes a token's steps with it; q is [s, d] and α is [s]. With n_h = 1 every operation is Gated Delta's, in its order,
 * so the two agree bitwise (sheet, "What is checked").
 *
 * Declared below (`gated_delta_product`, tokenRows) and registered
 * (docs/spec/titans-family.md#gated-delta-product-status).
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { gated_delta } from "./gated_delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { InnerInputs, InnerPair, RuleConfig, RuleDecl } from "./types.ts";

/** The number of Householder steps per token, n_h ∈ {1, 2, 3} (a hyperparameter, default 2). */
export function householderSteps(cfg: RuleConfig): number {
  const n = cfg.n_h ?? 2;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 3) {
    throw new Error(`gated_delta_product: hyperparameter n_h must be 1, 2 or 3, got ${String(n)}`);
  }
  return n;
}

/**
 * Token-major, as the level's stretch and chunk machinery slices and joins saved tensors (first
 * dimension s or s + 1): saved.mStates [s + 1, d, d] holds M_0 … M_s, saved.pInner [s, n_h − 1, d, d]
 * the states P_1 … P_{n_h−1} between a token's steps, saved.e [s, n_h·d] the errors e_{t,j}.
 * At n_h = 1 mStates and e are Gated Delta's and pInner is empty.
 */
export const gatedDeltaProductInner: InnerPair<"mStates" | "pInner" | "e"> = {
  saved: ["mStates", "pInner", "e"],
  forward({ k, v, q, alpha, theta }, state, cfg) {
    const { d, seq_len: s } = cfg;
    const nh = householderSteps(cfg);
    const dd = d * d, rows = s * nh;
    if (k.size !== rows * d || v.size !== rows * d || theta!.size !== rows) {
      throw new Error(`gated_delta_product: k, v need [s, n_h·d] = [${s}, ${nh * d}] and theta [s, n_h] = [${s}, ${nh}]; got k ${k.size}, v ${v.size}, theta ${theta!.size} elements`);
    }
    const M = alloc(k.dtype, (s + 1) * dd), Pin = alloc(k.dtype, s * (nh - 1) * dd);
    M.set(state.M!.data);
    const e = alloc(k.dtype, rows * d);
    const y = alloc(k.dtype, s * d);
    for (let t = 0; t < s; t++) {
      const a = alpha!.data[t]!;
      for (let j = 0; j < nh; j++) {
        const r = t * nh + j, o = r * d;
        // P_{j+1}: M_{t+1} after the last step, else its slot between the steps
        const [to, at] = j === nh - 1 ? [M, (t + 1) * dd] : [Pin, (t * (nh - 1) + j) * dd];
        if (j === 0) for (let i = 0; i < dd; i++) to[at + i] = (1 - a) * M[t * dd + i]!; // P_0 = M̃_t
        else to.set(Pin.subarray((t * (nh - 1) + j - 1) * dd, (t * (nh - 1) + j) * dd), at);
        K.matvec(to, at, d, d, k.data, o, e, o);
        for (let i = 0; i < d; i++) e[o + i]! -= v.data[o + i]!;
        K.addOuter(to, at, d, d, -theta!.data[r]!, e, o, k.data, o);
      }
      K.matvec(M, (t + 1) * dd, d, d, q.data, t * d, y, t * d);
    }
    const dt = k.dtype;
    return {
      y: new Tensor(dt, [s, d], y),
      finalState: { M: new Tensor(dt, [d, d], M.slice(s * dd)) },
      saved: {
        mStates: new Tensor(dt, [s + 1, d, d], M), pInner: new Tensor(dt, [s, nh - 1, d, d], Pin),
        e: new Tensor(dt, [s, nh * d], e),
      },
    };
  },
  backward({ mStates, pInner, e }, { k, q, alpha, theta }, dy, cfg, dFinal) {
    const { d, seq_len: s } = cfg;
    const nh = householderSteps(cfg);
    const dt = k.dtype, dd = d * d, rows = s * nh;
    const M = mStates!.data, Pin = pInner!.data, E = e!.data;
    const dk = alloc(dt, rows * d), dv = alloc(dt, rows * d), dq = alloc(dt, s * d);
    const dalpha = alloc(dt, s), dtheta = alloc(dt, rows);
    const D = adjointFrom(dFinal, "M", dd); // ∂L/∂(the state after the step being undone)
    const de = accBuffer(d), tmp = accBuffer(d);
    for (let t = s - 1; t >= 0; t--) {
      const qo = t * d;
      K.addOuter(D, 0, d, d, 1, dy.data, qo, q.data, qo);
      K.matTvec(M, (t + 1) * dd, d, d, dy.data, qo, dq, qo);
      const a = alpha!.data[t]!;
      for (let j = nh - 1; j >= 0; j--) {
        const r = t * nh + j, o = r * d, th = theta!.data[r]!;
        // D = ∂L/∂P_{j+1}; dθ = −eᵀ D k
        K.matvec(D, 0, d, d, k.data, o, de, 0);
        dtheta[r] = -K.dot(E, de, d, o, 0);
        // the write −θ e kᵀ: de = −θ D k ; dk = −θ Dᵀ e ; dv = −de
        for (let i = 0; i < d; i++) de[i]! *= -th;
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let i = 0; i < d; i++) dk[o + i] = -th * tmp[i]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
        // the prediction P_j k: P_0 = M̃_t = (1 − α_t) M_t is rebuilt from M_t, P_j saved for j > 0
        if (j === 0) {
          K.matTvec(M, t * dd, d, d, de, 0, tmp, 0);
          for (let i = 0; i < d; i++) dk[o + i]! += (1 - a) * tmp[i]!;
        } else {
          K.matTvec(Pin, (t * (nh - 1) + j - 1) * dd, d, d, de, 0, tmp, 0);
          for (let i = 0; i < d; i++) dk[o + i]! += tmp[i]!;
        }
        K.addOuter(D, 0, d, d, 1, de, 0, k.data, o); // ∂L/∂P_j
      }
      // the decay: dα = −⟨∂L/∂M̃_t, M_t⟩ ; ∂L/∂M_t = (1 − α_t) ∂L/∂M̃_t
      dalpha[t] = -K.frob(D, 0, M, t * dd, dd);
      for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
    }
    return {
      dk: new Tensor(dt, [s, nh * d], dk), dv: new Tensor(dt, [s, nh * d], dv), dq: new Tensor(dt, [s, d], dq),
      dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s, nh], dtheta),
      dState0: { M: gradTensor(dt, [d, d], D) },
    };
  },
};

/** A random case of the pair: unit keys and queries, α ∈ [0.05, 0.5], θ ∈ [0.05, 0.9], a random M_0. */
export function randomCase(dtype: DType, seed: number, nh: number, d = 5, s = 7) {
  const rng = new Rng(seed);
  const rand = (shape: number[], lo: number, hi: number) => {
    const t = new Tensor(dtype, shape);
    for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
    return t;
  };
  const unitRows = (t: Tensor) => {
    const rows = t.size / d;
    for (let r = 0; r < rows; r++) {
      let n = 0;
      for (let i = 0; i < d; i++) n += t.data[r * d + i]! ** 2;
      for (let i = 0; i < d; i++) t.data[r * d + i]! /= Math.sqrt(n);
    }
    return t;
  };
  const k = unitRows(rand([s, nh * d], -1, 1));
  const inp: InnerInputs = {
    k, v: rand([s, nh * d], -1, 1), q: unitRows(rand([s, d], -1, 1)), x: unitRows(rand([s, d], -1, 1)),
    alpha: rand([s], 0.05, 0.5), theta: rand([s, nh], 0.05, 0.9),
  };
  return { inp, M0: rand([d, d], -0.3, 0.3), dy: rand([s, d], -1, 1), dM: rand([d, d], -1, 1), cfg: { d, seq_len: s, n_h: nh } as RuleConfig };
}

/**
 * n_h = 1 is Gated Delta: on a random case with a random initial state, y, the final state and
 * every gradient (dα included: the decay is applied as Gated Delta applies it) equal Gated Delta's
 * bitwise. Returns null when they do.
 */
export function equalsGatedDeltaAtOneStep(pair: InnerPair<string>, dtype: DType, seed: number): string | null {
  const { inp, M0, dy, dM, cfg } = randomCase(dtype, seed, 1);
  const a = pair.forward(inp, { M: M0 }, cfg);
  const b = gated_delta.inner.forward(inp, { M: M0 }, cfg);
  const ga = pair.backward(a.saved, inp, dy, cfg, { M: dM });
  const gb = gated_delta.inner.backward(b.saved, inp, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M], ["dk", ga.dk, gb.dk], ["dv", ga.dv, gb.dv],
    ["dq", ga.dq, gb.dq], ["dalpha", ga.dalpha, gb.dalpha], ["dtheta", ga.dtheta, gb.dtheta], ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(p.data[i], r.data[i])) return `${name}[${i}] = ${p.data[i]}, Gated Delta gives ${r.data[i]}`;
  }
  return null;
}

/**
 * The forward in the key-major form of linear-attention libraries, written from the sheet
 * independently of the pair: a state S = Mᵀ [d_k, d_v], per token S ← a_t S (a_t = 1 − α_t), then
 * for each step S ← S + θ k (v − Sᵀ k)ᵀ, and o_t = Sᵀ q_t. Plain nested loops in f64.
 */
export function keyMajorForward(inp: InnerInputs, M0: Tensor, cfg: RuleConfig): { y: number[]; M: number[] } {
  const { d, seq_len: s } = cfg;
  const nh = householderSteps(cfg);
  const S: number[][] = Array.from({ length: d }, (_, kk) => Array.from({ length: d }, (_, vv) => M0.data[vv * d + kk]!));
  const y: number[] = [];
  for (let t = 0; t < s; t++) {
    const a = 1 - inp.alpha!.data[t]!;
    for (const row of S) for (let vv = 0; vv < d; vv++) row[vv]! *= a;
    for (let j = 0; j < nh; j++) {
      const r = t * nh + j, kr = (i: number) => inp.k.data[r * d + i]!;
      const u = Array.from({ length: d }, (_, vv) => inp.v.data[r * d + vv]! - S.reduce((acc, row, kk) => acc + row[vv]! * kr(kk), 0));
      for (let kk = 0; kk < d; kk++) for (let vv = 0; vv < d; vv++) S[kk]![vv]! += inp.theta!.data[r]! * kr(kk) * u[vv]!;
    }
    for (let vv = 0; vv < d; vv++) y.push(S.reduce((acc, row, kk) => acc + row[vv]! * inp.q.data[t * d + kk]!, 0));
  }
  const M: number[] = [];
  for (let vv = 0; vv < d; vv++) for (let kk = 0; kk < d; kk++) M.push(S[kk]![vv]!);
  return { y, M };
}

/**
 * The rule's declaration (docs/spec/titans-family.md#gated-delta-product-level): Gated Delta's
 * projections, gates, state and frozen read, with n_h rows per token of k, v and θ (tokenRows):
 * W_K, W_V [n_h·d, d], each d-row of k normalised, θ_{t,j} from its own row [k_{t,j}; v_{t,j}] with
 * Gated Delta's w_theta [2d], b_theta [1], α_t from the token's first row. At n_h = 1 every
 * parameter, input and operation is Gated Delta's. Registered (sheet 2f.6): its kernel pair is
 * cuda/gated_delta_product.cu.
 */
export const gated_delta_product: RuleDecl<"gated_delta_product"> = {
  key: "gated_delta_product",
  sheet: "docs/spec/titans-family.md#gated-delta-product",
  hyper: {
    n_h: {
      kind: "int", default: 2, min: 1, max: 3,
      doc: "Householder steps per token: rows of k, v and theta per token (n_h = 1 is Gated Delta)",
    },
  },
  projection: gated_delta.projection,
  gates: gated_delta.gates,
  normalizeKQ: gated_delta.normalizeKQ,
  omega: gated_delta.omega,
  tokenRows: { hyper: "n_h", inputs: ["k", "v", "theta"] },
  stateShapes: gated_delta.stateShapes,
  init: gated_delta.init,
  randomState: gated_delta.randomState,
  frozen: gated_delta.frozen,
  checkMinimums: gated_delta.checkMinimums,
  inner: gatedDeltaProductInner,
  invariants: [
    {
      name: "Gated Delta at n_h = 1",
      spec: "docs/spec/titans-family.md#gated-delta-product-tests n_h = 1: y, the final state and every gradient, dalpha included, equal Gated Delta's bitwise",
      check: (dtype, seed) => equalsGatedDeltaAtOneStep(gatedDeltaProductInner, dtype, seed),
    },
  ],
};
