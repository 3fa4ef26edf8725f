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
import { Tensor } from "../tensor.ts";
import { adjointFrom } from "./state-grad.ts";
import { trellisScratch, trellisSweep, trellisTokenBackward, type TrellisTape } from "./trellis.ts";
import type { InnerInputs, RuleConfig, State } from "./types.ts";
import { checkChunkSize, chunkStart } from "./chunk-start.ts";

/** The output and final state, and the tape: S_K^0..S_K^s, S_V^0..S_V^s and the per-token r, ĉ, e^k, u, c, e^v. */
export interface TrellisChunkForward extends TrellisTape {
  y: Tensor;
  finalState: State;
}

export function trellisChunkStartGd(inp: InnerInputs, state: State, cfg: RuleConfig, C: number): TrellisChunkForward {
  checkChunkSize(C);
  const { d, seq_len: s } = cfg;
  const dk = cfg.d_compress as number;
  const dt = inp.k.dtype, n = dk * d;
  const { y, tape } = trellisSweep(inp, state, cfg, dk, (t) => chunkStart(t, C));
  const { SK, SV } = tape;
  return {
    y: new Tensor(dt, [s, d], y),
    finalState: { S_K: new Tensor(dt, [dk, d], SK.slice(s * n)), S_V: new Tensor(dt, [d, dk], SV.slice(s * n)) },
    ...tape,
  };
}

export interface TrellisChunkGrads {
  dk: Float64Array; dv: Float64Array; dq: Float64Array; dx: Float64Array; dalpha: Float64Array; dtheta: Float64Array;
  dS_K: Float64Array; dS_V: Float64Array;
}

/** Exact backward of trellisChunkStartGd for upstream dy and ∂L/∂(final S_K, S_V) (zero when absent). */
export function trellisChunkStartGdBackward(fw: TrellisChunkForward, inp: InnerInputs, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): TrellisChunkGrads {
  const { d, seq_len: s } = cfg;
  const dk = cfg.d_compress as number;
  const n = dk * d;
  const g: TrellisChunkGrads = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d), dx: new Float64Array(s * d),
    dalpha: new Float64Array(s), dtheta: new Float64Array(s), dS_K: new Float64Array(n), dS_V: new Float64Array(n),
  };
  const scratch = trellisScratch(d, dk);
  // Ĝ = ∂L/∂S^{t+1}; P = ∂L/∂S^t through the running state; F = ∂L/∂S^c through the chunk's errors.
  let GK = adjointFrom(dFinal, "S_K", n), GV = adjointFrom(dFinal, "S_V", n), PK = accBuffer(n), PV = accBuffer(n);
  const FK = accBuffer(n), FV = accBuffer(n);
  for (let t = s - 1; t >= 0; t--) {
    const f = chunkStart(t, C);
    trellisTokenBackward(fw, inp, cfg, dk, dy, t, f, { GK, GV, PK, PV, FK, FV }, scratch, g);
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
