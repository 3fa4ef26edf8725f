/**
 * Trellis (docs/spec/miras-compression.md#trellis): two-pass key/value compression, READ BEFORE WRITE.
 *   READ    r_t = S_K^t q_t ;  ĉ_t = nsilu(r_t) ;  y_t = S_V^t ĉ_t
 *   PASS 1  e^k_t = S_K^t x_t − k_t[0:dk] ;  S_K^{t+1} = (1−α_t) S_K^t − θ_t (e^k_t x_tᵀ + λ_k S_K^t)
 *   PASS 2  u_t = S_K^{t+1} x_t ;  c_t = nsilu(u_t) ;  e^v_t = S_V^t c_t − v_t
 *           S_V^{t+1} = (1−α_t) S_V^t − θ_t (e^v_t c_tᵀ + λ_v S_V^t)
 * x_t is the level input row itself, so the backward returns a direct dx (D2: the repo omits it).
 * α is a forget rate here, θ the inner learning rate. Frozen read: y_t = S_V nsilu(S_K q_t) (§6.5).
 */
import { accBuffer, accStep } from "../precision.ts";
import * as K from "../numeric.ts";
import { nsiluRow, nsiluRowVjp } from "../ops/index.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type Data, type DType } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { FrozenPair, InnerInputs, RuleConfig, RuleDecl, State } from "./types.ts";

function compressedSize(cfg: RuleConfig): number {
  const dk = cfg.d_compress as number;
  if (dk > cfg.d) throw new Error(`rule 'trellis': d_compress = ${dk} must be <= d = ${cfg.d} (§6.1)`);
  return dk;
}

const trellisFrozen: FrozenPair<"S_K" | "S_V" | "r"> = {
  saved: ["S_K", "S_V", "r"],
  forward(q, state, cfg) {
    const { d, seq_len: s } = cfg;
    const dk = compressedSize(cfg);
    const SK = state.S_K!, SV = state.S_V!;
    const r = alloc(q.dtype, s * dk), cHat = accBuffer(s * dk), y = alloc(q.dtype, s * d);
    const yt = accBuffer(d);
    for (let t = 0; t < s; t++) {
      K.matvec(SK.data, 0, dk, d, q.data, t * d, r, t * dk);
      nsiluRow(r, t * dk, dk, cHat);
      K.matvec(SV.data, 0, d, dk, cHat, t * dk, yt, 0);
      for (let i = 0; i < d; i++) y[t * d + i] = yt[i]!;
    }
    return { y: new Tensor(q.dtype, [s, d], y), saved: { S_K: SK, S_V: SV, r: new Tensor(q.dtype, [s, dk], r) } };
  },
  backward({ S_K, S_V, r }, q, dy, cfg) {
    const { d, seq_len: s } = cfg;
    const dk = compressedSize(cfg);
    const dq = alloc(q.dtype, s * d);
    const dcHat = accBuffer(dk), dr = accBuffer(dk), dqt = accBuffer(d);
    // dS_V = Σ dy_t ĉ_tᵀ (ĉ recomputed from the saved r), dS_K = Σ dr_t q_tᵀ
    const cHat = accBuffer(s * dk), dSK = accBuffer(dk * d), dSV = accBuffer(d * dk);
    for (let t = 0; t < s; t++) {
      K.matTvec(S_V!.data, 0, d, dk, dy.data, t * d, dcHat, 0);
      nsiluRowVjp(r!.data, dcHat, t * dk, dk, dr, 0);
      K.matTvec(S_K!.data, 0, dk, d, dr, 0, dqt, 0);
      for (let j = 0; j < d; j++) dq[t * d + j] = dqt[j]!;
      nsiluRow(r!.data, t * dk, dk, cHat);
      K.addOuter(dSV, 0, d, dk, 1, dy.data, t * d, cHat, t * dk);
      K.addOuter(dSK, 0, dk, d, 1, dr, 0, q.data, t * d);
    }
    return {
      dq: new Tensor(q.dtype, [s, d], dq),
      dState: { S_K: gradTensor(q.dtype, [dk, d], dSK), S_V: gradTensor(q.dtype, [d, dk], dSV) },
    };
  },
};

export const trellis: RuleDecl<"trellis"> = {
  key: "trellis",
  sheet: "docs/spec/miras-compression.md#trellis",
  hyper: {
    d_compress: { kind: "int", default: 4, min: 1, max: 4096, sample: [1, 12], boundByD: "at-most", doc: "compressed size dk (<= d) of S_K [dk,d] and S_V [d,dk] (§6.1)" },
    lambda_k: { kind: "real", default: 0.01, min: 0, max: 10, sample: [0, 0.1], doc: "L2 retention on S_K inside the θ step (λ, not 2λ)" },
    lambda_v: { kind: "real", default: 0.01, min: 0, max: 10, sample: [0, 0.1], doc: "L2 retention on S_V inside the θ step (λ, not 2λ)" },
  },
  projection: "memory",
  gates: ["alpha", "theta"],
  normalizeKQ: false,
  omega: false,
  kernel: { extraInputs: ["x"] }, // reads the level input row directly
  stateShapes: (cfg) => {
    const dk = cfg.d_compress as number;
    return { S_K: [dk, cfg.d], S_V: [cfg.d, dk] };
  },
  init(cfg, dtype) {
    const dk = compressedSize(cfg);
    return { S_K: zeros(dtype, [dk, cfg.d]), S_V: zeros(dtype, [cfg.d, dk]) };
  },
  randomState(cfg, dtype, rnd) {
    const dk = compressedSize(cfg), d = cfg.d;
    const SK = zeros(dtype, [dk, d]), SV = zeros(dtype, [d, dk]);
    for (const t of [SK, SV]) for (let i = 0; i < t.size; i++) t.data[i] = (rnd() - 0.5) / Math.sqrt(d);
    return { S_K: SK, S_V: SV };
  },
  inner: {
    saved: ["skStates", "svStates", "r", "cHat", "eK", "u", "c", "eV"],
    forward(inp, state, cfg) {
      const { d, seq_len: s } = cfg;
      const dk = compressedSize(cfg);
      const dt = inp.k.dtype, n = dk * d;
      const { y, tape: { SK, SV, r, cHat, eK, u, c, eV } } = trellisSweep(inp, state, cfg, dk, (t) => t);
      const T = (shape: number[], data: Data) => new Tensor(dt, shape, data);
      return {
        y: T([s, d], y),
        finalState: { S_K: T([dk, d], SK.slice(s * n)), S_V: T([d, dk], SV.slice(s * n)) },
        saved: {
          skStates: T([s + 1, dk, d], SK), svStates: T([s + 1, d, dk], SV),
          r: T([s, dk], r), cHat: T([s, dk], cHat), eK: T([s, dk], eK), u: T([s, dk], u), c: T([s, dk], c), eV: T([s, d], eV),
        },
      };
    },
    backward({ skStates, svStates, r, cHat, eK, u, c, eV }, inp, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg;
      const dk = compressedSize(cfg);
      const dt = inp.k.dtype, n = dk * d;
      const tape: TrellisTape = {
        SK: skStates!.data, SV: svStates!.data, r: r!.data, cHat: cHat!.data, eK: eK!.data, u: u!.data, c: c!.data, eV: eV!.data,
      };
      const dK = alloc(dt, s * d), dV = alloc(dt, s * d), dQ = alloc(dt, s * d), dX = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      const out: TrellisTokenGrads = { dk: dK, dv: dV, dq: dQ, dx: dX, dalpha, dtheta };
      const scratch = trellisScratch(d, dk);
      // Ĝ = ∂L/∂S^{t+1} from later tokens; P = ∂L/∂S^t being built at token t. The errors read S^t, so
      // their adjoints go straight into P.
      let GK = adjointFrom(dFinal, "S_K", n), GV = adjointFrom(dFinal, "S_V", n), PK = accBuffer(n), PV = accBuffer(n);
      for (let t = s - 1; t >= 0; t--) {
        trellisTokenBackward(tape, inp, cfg, dk, dy, t, t, { GK, GV, PK, PV, FK: PK, FV: PV }, scratch, out);
        [GK, PK] = [PK, GK];
        [GV, PV] = [PV, GV];
      }
      return {
        dk: new Tensor(dt, [s, d], dK), dv: new Tensor(dt, [s, d], dV), dq: new Tensor(dt, [s, d], dQ),
        dx: new Tensor(dt, [s, d], dX), dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        // after the last swap Ĝ holds P of t = 0: ∂L/∂S_K^0, ∂L/∂S_V^0
        dState0: { S_K: gradTensor(dt, [dk, d], GK), S_V: gradTensor(dt, [d, dk], GV) },
      };
    },
  },
  frozen: trellisFrozen,
  // Read before write from S = 0: the first two reads see no alpha. d_compress = 1: nsilu of a
  // scalar is ±1, so the read carries no gradient to W_Q.
  checkMinimums: { d: 2, seq_len: 3, hyper: { d_compress: 2 } },
  // Pass 2 writes S_V with c_t = nsilu(...), |c_t|^2 = dk: the effective step is θ·dk.
  thetaScale: (cfg) => Number(cfg.d_compress),
  invariants: [
    {
      name: "nsilu output norm is sqrt(dk)",
      spec: "docs/spec/miras-compression.md#trellis-nsilu, docs/spec/miras-compression.md#trellis-tests normalized_silu_output_scale: ‖nsilu(u)‖ = √dk whenever it is non-zero; exactly 0 below the 1e-8 guard",
      check: nsiluScale,
    },
  ],
};

/** The flat Trellis tape: states S_K^0..S_K^s, S_V^0..S_V^s and the per-token r, ĉ, e^k, u, c, e^v. */
export interface TrellisTape { SK: Data; SV: Data; r: Data; cHat: Data; eK: Data; u: Data; c: Data; eV: Data }

/**
 * One token of the recurrence (read, pass 1, pass 2), writing S^{t+1} from S^t. The errors e^k_t, e^v_t
 * read the state of token `e`: the running state (e = t) in the rule, the chunk start in the chunk form
 * (docs/spec/chunk-forms.md#chunk-start-gd-trellis); everything else is the same arithmetic.
 */
export function trellisToken(tp: TrellisTape, { k, v, q, x, alpha, theta }: InnerInputs, cfg: RuleConfig, dk: number,
  t: number, e: number, y: Data, yt: Data): void {
  const { SK, SV, r, cHat, eK, u, c, eV } = tp;
  const d = cfg.d, n = dk * d;
  const lk = cfg.lambda_k as number, lv = cfg.lambda_v as number;
  const at = t * n, an = (t + 1) * n, ae = e * n, o = t * d, oc = t * dk;
  const a = alpha!.data[t]!, th = theta!.data[t]!;
  // READ    r_t = S_K^t q_t ;  ĉ_t = nsilu(r_t) ;  y_t = S_V^t ĉ_t
  K.matvec(SK, at, dk, d, q.data, o, r, oc);
  nsiluRow(r, oc, dk, cHat);
  K.matvec(SV, at, d, dk, cHat, oc, yt, 0);
  for (let i = 0; i < d; i++) y[o + i] = yt[i]!;

  // PASS 1  e^k_t = S_K^e x_t − k_t ;  S_K^{t+1} = (1−α_t−θ_tλ_k) S_K^t − θ_t e^k_t x_tᵀ
  K.matvec(SK, ae, dk, d, x.data, o, eK, oc);
  for (let i = 0; i < dk; i++) eK[oc + i]! -= k.data[o + i]!;
  const rk = 1 - a - th * lk;
  for (let i = 0; i < n; i++) SK[an + i] = rk * SK[at + i]!;
  K.addOuter(SK, an, dk, d, -th, eK, oc, x.data, o);

  // PASS 2  u_t = S_K^{t+1} x_t ;  c_t = nsilu(u_t) ;  e^v_t = S_V^e c_t − v_t
  //         S_V^{t+1} = (1−α_t−θ_tλ_v) S_V^t − θ_t e^v_t c_tᵀ
  K.matvec(SK, an, dk, d, x.data, o, u, oc);
  nsiluRow(u, oc, dk, c);
  K.matvec(SV, ae, d, dk, c, oc, eV, o);
  for (let i = 0; i < d; i++) eV[o + i]! -= v.data[o + i]!;
  const rv = 1 - a - th * lv;
  for (let i = 0; i < n; i++) SV[an + i] = rv * SV[at + i]!;
  K.addOuter(SV, an, d, dk, -th, eV, o, c, oc);
}

/** Runs every token from `state`; token t's errors read the state of token errorAt(t). */
export function trellisSweep(inp: InnerInputs, state: State, cfg: RuleConfig, dk: number,
  errorAt: (t: number) => number): { y: Data; tape: TrellisTape } {
  const { d, seq_len: s } = cfg;
  const dt = inp.k.dtype, n = dk * d;
  const SK = alloc(dt, (s + 1) * n), SV = alloc(dt, (s + 1) * n);
  SK.set(state.S_K!.data);
  SV.set(state.S_V!.data);
  const r = alloc(dt, s * dk), cHat = alloc(dt, s * dk), eK = alloc(dt, s * dk);
  const u = alloc(dt, s * dk), c = alloc(dt, s * dk), eV = alloc(dt, s * d), y = alloc(dt, s * d);
  const yt = accBuffer(d);
  const tape: TrellisTape = { SK, SV, r, cHat, eK, u, c, eV };
  for (let t = 0; t < s; t++) trellisToken(tape, inp, cfg, dk, t, errorAt(t), y, yt);
  return { y, tape };
}

/** Per-token input gradients, written row by row by trellisTokenBackward. */
export interface TrellisTokenGrads { dk: Data; dv: Data; dq: Data; dx: Data; dalpha: Data; dtheta: Data }

/**
 * Adjoint buffers of one backward token. G = ∂L/∂S^{t+1} (complete); P = ∂L/∂S^t being built;
 * F receives the errors' adjoints w.r.t. the state they read: P itself in the rule, a chunk accumulator
 * in the chunk form.
 */
export interface TrellisAdjoints { GK: Data; GV: Data; PK: Data; PV: Data; FK: Data; FV: Data }

export type TrellisScratch = ReturnType<typeof trellisScratch>;

export function trellisScratch(d: number, dk: number) {
  return {
    dcHat: accBuffer(dk), dr: accBuffer(dk), dc: accBuffer(dk), du: accBuffer(dk),
    gc: accBuffer(d), gx: accBuffer(dk), dev: accBuffer(d), dek: accBuffer(dk),
    tmpD: accBuffer(d), tmpC: accBuffer(dk), dxt: accBuffer(d), dqt: accBuffer(d),
  };
}

/**
 * Adjoint of one pass's write S^{t+1} = r S^t − θ e wᵀ (S [rows, cols], r = 1 − α − θλ) for G = ∂L/∂S^{t+1}:
 * P += r G; de = −θ G w (into dErr, scratch gw = G w); F += de wᵀ (the error's state, which F stands for);
 * dTarget[to..] = −de (the error subtracts its target). Returns ⟨G, S^t⟩ and eᵀ G w, the pieces of dα and dθ.
 */
function writeVjp(G: Data, P: Data, F: Data, S: Data, at: number, rows: number, cols: number, r: number, th: number,
  w: Data, wo: number, err: Data, eo: number, gw: Data, dErr: Data, dTarget: Data, to: number): [number, number] {
  for (let i = 0; i < rows * cols; i++) P[i]! += r * G[i]!;
  K.matvec(G, 0, rows, cols, w, wo, gw, 0);
  for (let i = 0; i < rows; i++) dErr[i] = -th * gw[i]!;
  const gS = K.frob(G, 0, S, at, rows * cols);
  const eGw = K.dot(err, gw, rows, eo, 0);
  K.addOuter(F, 0, rows, cols, 1, dErr, 0, w, wo);
  for (let i = 0; i < rows; i++) dTarget[to + i] = -dErr[i]!;
  return [gS, eGw];
}

/** Exact backward of trellisToken for the same `e`; GK gains pass 2's code adjoint before pass 1 reads it. */
export function trellisTokenBackward(tp: TrellisTape, { q, x, alpha, theta }: InnerInputs, cfg: RuleConfig, dk: number,
  dy: Tensor, t: number, e: number, adj: TrellisAdjoints, sc: TrellisScratch, g: TrellisTokenGrads): void {
  const { SK, SV, r: R, cHat: CH, eK: EK, u: U, c: C, eV: EV } = tp;
  const { GK, GV, PK, PV, FK, FV } = adj;
  const { dcHat, dr, dc, du, gc, gx, dev, dek, tmpD, tmpC, dxt, dqt } = sc;
  const d = cfg.d, n = dk * d, X = x.data;
  const lk = cfg.lambda_k as number, lv = cfg.lambda_v as number;
  const at = t * n, an = (t + 1) * n, ae = e * n, o = t * d, oc = t * dk;
  const a = alpha!.data[t]!, th = theta!.data[t]!;

  // (read, running state)
  PV.fill(0);
  K.addOuter(PV, 0, d, dk, 1, dy.data, o, CH, oc);
  K.matTvec(SV, at, d, dk, dy.data, o, dcHat, 0);
  nsiluRowVjp(R, dcHat, oc, dk, dr, 0);
  PK.fill(0);
  K.addOuter(PK, 0, dk, d, 1, dr, 0, q.data, o);
  K.matTvec(SK, at, dk, d, dr, 0, dqt, 0);

  // (pass 2)  retention on the running S_V^t; Ĝ_V c_t serves both de^v and dθ; e^v reads S_V^e
  const [gvS, eGc] = writeVjp(GV, PV, FV, SV, at, d, dk, 1 - a - th * lv, th, C, oc, EV, o, gc, dev, g.dv, o);
  let da = -gvS;
  let dth = accStep(-eGc - lv * gvS);
  K.matTvec(GV, 0, d, dk, EV, o, dc, 0);
  K.matTvec(SV, ae, d, dk, dev, 0, tmpC, 0);
  for (let i = 0; i < dk; i++) dc[i] = -th * dc[i]! + tmpC[i]!;
  nsiluRowVjp(U, dc, oc, dk, du, 0);
  // the code reads the freshly written running S_K^{t+1} and the input row x_t directly
  K.addOuter(GK, 0, dk, d, 1, du, 0, X, o);
  K.matTvec(SK, an, dk, d, du, 0, dxt, 0);

  // (pass 1)  GK now holds ∂L/∂S_K^{t+1} in full; e^k = S_K^e x − k reaches F_K
  const [gkS, eGx] = writeVjp(GK, PK, FK, SK, at, dk, d, 1 - a - th * lk, th, X, o, EK, oc, gx, dek, g.dk, o);
  da = accStep(da - gkS);
  dth = accStep(dth + (-eGx - lk * gkS));
  // x_t enters e^k_t = S_K^e x_t − k_t and the outer product e^k_t x_tᵀ
  K.matTvec(SK, ae, dk, d, dek, 0, tmpD, 0);
  for (let j = 0; j < d; j++) dxt[j]! += tmpD[j]!;
  K.matTvec(GK, 0, dk, d, EK, oc, tmpD, 0);
  for (let j = 0; j < d; j++) g.dx[o + j] = dxt[j]! - th * tmpD[j]!;

  for (let j = 0; j < d; j++) g.dq[o + j] = dqt[j]!;
  g.dalpha[t] = da;
  g.dtheta[t] = dth;
}

/**
 * Every read ĉ_t and pass-2 code c_t, from the zero init (whose first read must hit the guard and be
 * exactly 0) and from a random state. f32 stores each entry once rounded, so the norm is within about
 * 2^-24 relative; 1e-6 allows that and nothing else.
 */
function nsiluScale(dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 9, s = 10;
  const tol = dtype === "f64" ? 1e-12 : 1e-6;
  const rand = (shape: number[], lo: number, hi: number): Tensor => {
    const t = zeros(dtype, shape);
    for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
    return t;
  };
  for (const dk of [1, 4, d]) {
    const cfg: RuleConfig = { d, seq_len: s, d_compress: dk, lambda_k: 0.01, lambda_v: 0.01 };
    const inp: InnerInputs = {
      k: rand([s, d], -1, 1), v: rand([s, d], -1, 1), q: rand([s, d], -1, 1), x: rand([s, d], -1, 1),
      alpha: rand([s], 0.05, 0.95), theta: rand([s], 0.05, 0.8),
    };
    const starts: [string, State][] = [
      ["zero", trellis.init(cfg, dtype)],
      ["random", trellis.randomState(cfg, dtype, () => rng.next())],
    ];
    for (const [name, state] of starts) {
      const sv = trellis.inner.forward(inp, state, cfg).saved;
      for (const key of ["cHat", "c"] as const) {
        const A = sv[key]!.data;
        for (let t = 0; t < s; t++) {
          const nrm = Math.sqrt(K.dot(A, A, dk, t * dk, t * dk));
          if (name === "zero" && key === "cHat" && t === 0) {
            if (nrm !== 0) return `zero start: ĉ_0 has norm ${nrm}, expected exactly 0 (S_K^0 = 0 hits the guard)`;
          } else if (nrm !== 0 && !(Math.abs(nrm - Math.sqrt(dk)) <= tol * Math.sqrt(dk))) {
            return `${name} start, dk=${dk}: ‖${key}_${t}‖ = ${nrm}, expected √dk = ${Math.sqrt(dk)}`;
          }
        }
      }
    }
  }
  return null;
}
