/**
 * Chunk-start GD for Lattice (docs/spec/chunk-forms.md#chunk-start-gd-lattice).
 *
 * The write's data term δ_i = α_t γ_i u_i (γ_i = σ(S_c[i]·k_t), and the similarity variant's
 * u_i = v_t − (S_c[i]·v_t) S_c[i]) is taken at the slot of the chunk's first token S_c; the tangent
 * projection and the renormalisation to the unit sphere act on the running slot S_t token by token,
 * like the other rules' retention. The read is on the running state. The forward performs the rule's
 * own per-token arithmetic, so C = 1 is the rule bit for bit. The backward is hand-written and exact
 * for the chunked function: the data term's adjoint w.r.t. S_c collects in an accumulator F that
 * joins the running adjoint when the backward reaches the chunk's first token.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { FALLBACK, readSlots, readSlotsVjp, writeVector, type Variant } from "./lattice.ts";
import { adjointFrom } from "./state-grad.ts";
import type { InnerInputs, RuleConfig, State } from "./types.ts";

export interface LatticeChunkForward {
  y: Tensor;
  finalState: State;
  /** S_0..S_s [s+1, m, d], read weights, γ, p = S_t[i]·δ_i and ‖ũ_i‖ per token and slot. */
  S: Data; readW: Data; gamma: Data; pDot: Data; uNorm: Data;
}

/** First token of the chunk holding token t. */
const chunkStart = (t: number, C: number): number => t - (t % C);

export function latticeChunkStartGd(inp: InnerInputs, state: State, cfg: RuleConfig, C: number): LatticeChunkForward {
  if (!Number.isInteger(C) || C < 1) throw new Error(`chunk size C = ${C}: expected an integer >= 1`);
  const { k, v, q, alpha } = inp;
  const { d, seq_len: s } = cfg;
  const m = cfg.m_slots as number, variant = cfg.variant as Variant;
  const dt = k.dtype, md = m * d;
  const S = alloc(dt, (s + 1) * md);
  S.set(state.S!.data);
  const readW = alloc(dt, s * m), gamma = alloc(dt, s * m), pDot = alloc(dt, s * m), uNorm = alloc(dt, s * m);
  const y = alloc(dt, s * d);
  const rho = accBuffer(m), yt = accBuffer(d), u = accBuffer(d), ut = accBuffer(d);
  for (let t = 0; t < s; t++) {
    const st = t * md, sn = (t + 1) * md, sc = chunkStart(t, C) * md, o = t * d;
    readSlots(S, st, m, d, q.data, o, rho, yt, readW, t * m, y);
    const a = alpha!.data[t]!;
    for (let i = 0; i < m; i++) {
      const si = st + i * d, ci = sc + i * d, ni = sn + i * d, ti = t * m + i;
      // data term at the chunk start
      gamma[ti] = K.sigmoid(K.dot(S, k.data, d, ci, o));
      writeVector(variant, S, ci, k.data, v.data, o, d, u);
      const beta = a * gamma[ti]!;
      // tangent projection and renormalisation on the running slot
      pDot[ti] = beta * K.dot(S, u, d, si, 0);
      const p = pDot[ti]!;
      for (let j = 0; j < d; j++) ut[j] = (1 - p) * S[si + j]! + beta * u[j]!;
      uNorm[ti] = Math.sqrt(K.dot(ut, ut, d));
      const n = uNorm[ti]!;
      if (n > FALLBACK) for (let j = 0; j < d; j++) S[ni + j] = ut[j]! / n;
      else for (let j = 0; j < d; j++) S[ni + j] = S[si + j]!;
    }
  }
  return {
    y: new Tensor(dt, [s, d], y), finalState: { S: new Tensor(dt, [m, d], S.slice(s * md)) },
    S, readW, gamma, pDot, uNorm,
  };
}

export interface LatticeChunkGrads {
  dk: Float64Array; dv: Float64Array; dq: Float64Array; dalpha: Float64Array; dS: Float64Array;
}

/** Exact backward of latticeChunkStartGd for upstream dy and ∂L/∂(final S) (zero when absent). */
export function latticeChunkStartGdBackward(fw: LatticeChunkForward, inp: InnerInputs, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): LatticeChunkGrads {
  const { k, v, q, alpha } = inp;
  const { d, seq_len: s } = cfg;
  const m = cfg.m_slots as number, variant = cfg.variant as Variant;
  const md = m * d;
  const { S, readW: W, gamma: G, pDot: Pd, uNorm: N } = fw;
  const g: LatticeChunkGrads = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d),
    dalpha: new Float64Array(s), dS: new Float64Array(md),
  };
  let Sh = adjointFrom(dFinal, "S", md); // ∂L/∂S_{t+1}
  let P = accBuffer(md); // ∂L/∂S_t through the running slot, built at token t
  const F = accBuffer(md); // ∂L/∂S_c through the data terms of the current chunk
  const dw = accBuffer(m), u = accBuffer(d), du = accBuffer(d), dut = accBuffer(d), dqt = accBuffer(d);
  for (let t = s - 1; t >= 0; t--) {
    const st = t * md, sn = (t + 1) * md, f = chunkStart(t, C), sc = f * md, o = t * d;
    P.fill(0);
    dqt.fill(0);
    readSlotsVjp(S, st, m, d, q.data, o, W, t * m, dy.data, dw, P, dqt);
    g.dq.set(dqt, o);
    const a = alpha!.data[t]!;
    let da = 0;
    for (let i = 0; i < m; i++) {
      const si = st + i * d, ci = sc + i * d, ni = sn + i * d, ti = t * m + i, pi = i * d;
      const n = N[ti]!;
      if (!(n > FALLBACK)) {
        // The forward copied S_t[i]: its adjoint passes straight through, the data term is unused.
        for (let j = 0; j < d; j++) P[pi + j]! += Sh[pi + j]!;
        continue;
      }
      const sh = K.dot(S, Sh, d, ni, pi);
      for (let j = 0; j < d; j++) dut[j] = (Sh[pi + j]! - S[ni + j]! * sh) / n;
      const c = K.dot(dut, S, d, 0, si);
      const gm = G[ti]!, p = Pd[ti]!, beta = a * gm;
      writeVector(variant, S, ci, k.data, v.data, o, d, u);
      // ũ = (1 − p) S_t + δ, p = S_t·δ: the running slot gets (1 − p) dũ − c δ; δ gets dũ − c S_t
      let ddu = 0;
      for (let j = 0; j < d; j++) {
        const ddelta = dut[j]! - c * S[si + j]!;
        P[pi + j]! += (1 - p) * dut[j]! - c * beta * u[j]!;
        ddu += ddelta * u[j]!;
        du[j] = beta * ddelta;
      }
      da += gm * ddu;
      // δ = α σ(S_c·k) u(S_c): everything below reaches S_c, i.e. F
      const dsc = a * ddu * gm * (1 - gm);
      if (variant === "decode") for (let j = 0; j < d; j++) g.dv[o + j]! += du[j]!;
      else if (variant === "encode") for (let j = 0; j < d; j++) g.dk[o + j]! += du[j]!;
      else {
        const c2 = K.dot(du, S, d, 0, ci), sv = K.dot(S, v.data, d, ci, o);
        for (let j = 0; j < d; j++) {
          g.dv[o + j]! += du[j]! - c2 * S[ci + j]!;
          F[pi + j]! -= sv * du[j]! + c2 * v.data[o + j]!;
        }
      }
      for (let j = 0; j < d; j++) {
        F[pi + j]! += dsc * k.data[o + j]!;
        g.dk[o + j]! += dsc * S[ci + j]!;
      }
    }
    g.dalpha[t] = da;
    if (t === f) {
      for (let i = 0; i < md; i++) P[i]! += F[i]!;
      F.fill(0);
    }
    [Sh, P] = [P, Sh];
  }
  g.dS.set(Sh);
  return g;
}
