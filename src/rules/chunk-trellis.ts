/**
 * Chunk-start GD for Trellis (docs/spec/chunk-forms.md#chunk-start-gd-trellis).
 *
 * Both passes take their error at the chunk start c, each in the state it writes; the retention
 * (1 − α − θλ) acts on the running state; the pass-2 code c_t is read from the freshly written
 * running S_K^{t+1}, as in the sequential rule (it is pass 2's key, not the state pass 2 writes):
 *   PASS 1  e^k_t = S_K^c x_t − k_t ;  S_K^{t+1} = (1−α_t−θ_tλ_k) S_K^t − θ_t e^k_t x_tᵀ
 *   PASS 2  c_t = nsilu(S_K^{t+1} x_t) ;  e^v_t = S_V^c c_t − v_t
 *           S_V^{t+1} = (1−α_t−θ_tλ_v) S_V^t − θ_t e^v_t c_tᵀ
 * The read is on the running state. The forward performs the rule's own per-token arithmetic, so
 * C = 1 is the rule bit for bit. The backward is hand-written and exact for the chunked function:
 * the errors' adjoints w.r.t. S_K^c, S_V^c collect in accumulators that join the running adjoints
 * when the backward reaches the chunk's first token.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { nsiluRow, nsiluRowVjp } from "../ops/index.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { adjointFrom } from "./state-grad.ts";
import type { InnerInputs, RuleConfig, State } from "./types.ts";

export interface TrellisChunkForward {
  y: Tensor;
  finalState: State;
  /** States S_K^0..S_K^s, S_V^0..S_V^s and the per-token r, ĉ, e^k, u, c, e^v. */
  SK: Data; SV: Data; r: Data; cHat: Data; eK: Data; u: Data; c: Data; eV: Data;
}

const chunkStart = (t: number, C: number): number => t - (t % C);

export function trellisChunkStartGd(inp: InnerInputs, state: State, cfg: RuleConfig, C: number): TrellisChunkForward {
  if (!Number.isInteger(C) || C < 1) throw new Error(`chunk size C = ${C}: expected an integer >= 1`);
  const { k, v, q, x, alpha, theta } = inp;
  const { d, seq_len: s } = cfg;
  const dk = cfg.d_compress as number;
  const lk = cfg.lambda_k as number, lv = cfg.lambda_v as number;
  const dt = k.dtype, n = dk * d;
  const SK = alloc(dt, (s + 1) * n), SV = alloc(dt, (s + 1) * n);
  SK.set(state.S_K!.data);
  SV.set(state.S_V!.data);
  const r = alloc(dt, s * dk), cHat = alloc(dt, s * dk), eK = alloc(dt, s * dk);
  const u = alloc(dt, s * dk), c = alloc(dt, s * dk), eV = alloc(dt, s * d), y = alloc(dt, s * d);
  const yt = accBuffer(d);
  for (let t = 0; t < s; t++) {
    const at = t * n, an = (t + 1) * n, ac = chunkStart(t, C) * n, o = t * d, oc = t * dk;
    const a = alpha!.data[t]!, th = theta!.data[t]!;
    K.matvec(SK, at, dk, d, q.data, o, r, oc);
    nsiluRow(r, oc, dk, cHat);
    K.matvec(SV, at, d, dk, cHat, oc, yt, 0);
    for (let i = 0; i < d; i++) y[o + i] = yt[i]!;

    K.matvec(SK, ac, dk, d, x.data, o, eK, oc);
    for (let i = 0; i < dk; i++) eK[oc + i]! -= k.data[o + i]!;
    const rk = 1 - a - th * lk;
    for (let i = 0; i < n; i++) SK[an + i] = rk * SK[at + i]!;
    K.addOuter(SK, an, dk, d, -th, eK, oc, x.data, o);

    K.matvec(SK, an, dk, d, x.data, o, u, oc);
    nsiluRow(u, oc, dk, c);
    K.matvec(SV, ac, d, dk, c, oc, eV, o);
    for (let i = 0; i < d; i++) eV[o + i]! -= v.data[o + i]!;
    const rv = 1 - a - th * lv;
    for (let i = 0; i < n; i++) SV[an + i] = rv * SV[at + i]!;
    K.addOuter(SV, an, d, dk, -th, eV, o, c, oc);
  }
  return {
    y: new Tensor(dt, [s, d], y),
    finalState: { S_K: new Tensor(dt, [dk, d], SK.slice(s * n)), S_V: new Tensor(dt, [d, dk], SV.slice(s * n)) },
    SK, SV, r, cHat, eK, u, c, eV,
  };
}

export interface TrellisChunkGrads {
  dk: Float64Array; dv: Float64Array; dq: Float64Array; dx: Float64Array; dalpha: Float64Array; dtheta: Float64Array;
  dS_K: Float64Array; dS_V: Float64Array;
}

/** Exact backward of trellisChunkStartGd for upstream dy and ∂L/∂(final S_K, S_V) (zero when absent). */
export function trellisChunkStartGdBackward(fw: TrellisChunkForward, inp: InnerInputs, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): TrellisChunkGrads {
  const { q, x, alpha, theta } = inp;
  const { d, seq_len: s } = cfg;
  const dk = cfg.d_compress as number;
  const lk = cfg.lambda_k as number, lv = cfg.lambda_v as number;
  const n = dk * d;
  const { SK, SV, r: R, cHat: CH, eK: EK, u: U, c: Cc, eV: EV } = fw;
  const X = x.data;
  const g: TrellisChunkGrads = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d), dx: new Float64Array(s * d),
    dalpha: new Float64Array(s), dtheta: new Float64Array(s), dS_K: new Float64Array(n), dS_V: new Float64Array(n),
  };
  // Ĝ = ∂L/∂S^{t+1}; P = ∂L/∂S^t through the running state; F = ∂L/∂S^c through the chunk's errors.
  let GK = adjointFrom(dFinal, "S_K", n), GV = adjointFrom(dFinal, "S_V", n), PK = accBuffer(n), PV = accBuffer(n);
  const FK = accBuffer(n), FV = accBuffer(n);
  const dcHat = accBuffer(dk), dr = accBuffer(dk), dc = accBuffer(dk), du = accBuffer(dk);
  const gc = accBuffer(d), gx = accBuffer(dk), dev = accBuffer(d), dek = accBuffer(dk);
  const tmpD = accBuffer(d), tmpC = accBuffer(dk), dxt = accBuffer(d), dqt = accBuffer(d);
  for (let t = s - 1; t >= 0; t--) {
    const at = t * n, an = (t + 1) * n, f = chunkStart(t, C), ac = f * n, o = t * d, oc = t * dk;
    const a = alpha!.data[t]!, th = theta!.data[t]!;

    // (read, running state)
    PV.fill(0);
    K.addOuter(PV, 0, d, dk, 1, dy.data, o, CH, oc);
    K.matTvec(SV, at, d, dk, dy.data, o, dcHat, 0);
    nsiluRowVjp(R, dcHat, oc, dk, dr, 0);
    PK.fill(0);
    K.addOuter(PK, 0, dk, d, 1, dr, 0, q.data, o);
    K.matTvec(SK, at, dk, d, dr, 0, dqt, 0);

    // (pass 2)  retention on the running S_V^t; e^v = S_V^c c − v reaches F_V
    const rv = 1 - a - th * lv;
    for (let i = 0; i < n; i++) PV[i]! += rv * GV[i]!;
    K.matvec(GV, 0, d, dk, Cc, oc, gc, 0);
    for (let i = 0; i < d; i++) dev[i] = -th * gc[i]!;
    const gvS = K.frob(GV, 0, SV, at, n);
    let da = -gvS;
    let dth = -K.dot(EV, gc, d, o, 0) - lv * gvS;
    K.addOuter(FV, 0, d, dk, 1, dev, 0, Cc, oc);
    for (let i = 0; i < d; i++) g.dv[o + i] = -dev[i]!;
    K.matTvec(GV, 0, d, dk, EV, o, dc, 0);
    K.matTvec(SV, ac, d, dk, dev, 0, tmpC, 0);
    for (let i = 0; i < dk; i++) dc[i] = -th * dc[i]! + tmpC[i]!;
    nsiluRowVjp(U, dc, oc, dk, du, 0);
    // the code reads the freshly written running S_K^{t+1}
    K.addOuter(GK, 0, dk, d, 1, du, 0, X, o);
    K.matTvec(SK, an, dk, d, du, 0, dxt, 0);

    // (pass 1)  GK holds ∂L/∂S_K^{t+1} in full; e^k = S_K^c x − k reaches F_K
    const rk = 1 - a - th * lk;
    for (let i = 0; i < n; i++) PK[i]! += rk * GK[i]!;
    K.matvec(GK, 0, dk, d, X, o, gx, 0);
    for (let i = 0; i < dk; i++) dek[i] = -th * gx[i]!;
    const gkS = K.frob(GK, 0, SK, at, n);
    da -= gkS;
    dth += -K.dot(EK, gx, dk, oc, 0) - lk * gkS;
    K.addOuter(FK, 0, dk, d, 1, dek, 0, X, o);
    for (let i = 0; i < dk; i++) g.dk[o + i] = -dek[i]!;
    K.matTvec(SK, ac, dk, d, dek, 0, tmpD, 0);
    for (let j = 0; j < d; j++) dxt[j]! += tmpD[j]!;
    K.matTvec(GK, 0, dk, d, EK, oc, tmpD, 0);
    for (let j = 0; j < d; j++) g.dx[o + j] = dxt[j]! - th * tmpD[j]!;

    g.dq.set(dqt, o);
    g.dalpha[t] = da;
    g.dtheta[t] = dth;
    if (t === f) {
      for (let i = 0; i < n; i++) {
        PK[i]! += FK[i]!;
        PV[i]! += FV[i]!;
      }
      FK.fill(0);
      FV.fill(0);
    }
    [GK, PK] = [PK, GK];
    [GV, PV] = [PV, GV];
  }
  g.dS_K.set(GK);
  g.dS_V.set(GV);
  return g;
}
