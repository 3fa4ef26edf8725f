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
import { Tensor } from "../tensor.ts";
import { latticeScratch, latticeSweep, latticeTokenBackward, type LatticeTape } from "./lattice.ts";
import { adjointFrom } from "./state-grad.ts";
import type { InnerInputs, RuleConfig, State } from "./types.ts";
import { checkChunkSize, chunkStart } from "./chunk-start.ts";

/** The output and final state, and the tape: S_0..S_s [s+1, m, d], read weights, γ, p = S_t[i]·δ_i and ‖ũ_i‖. */
export interface LatticeChunkForward extends LatticeTape {
  y: Tensor;
  finalState: State;
}

export function latticeChunkStartGd(inp: InnerInputs, state: State, cfg: RuleConfig, C: number): LatticeChunkForward {
  checkChunkSize(C);
  const { d, seq_len: s } = cfg;
  const m = cfg.m_slots as number;
  const dt = inp.k.dtype, md = m * d;
  const { y, tape } = latticeSweep(inp, state, cfg, (t) => chunkStart(t, C));
  return {
    y: new Tensor(dt, [s, d], y), finalState: { S: new Tensor(dt, [m, d], tape.S.slice(s * md)) },
    ...tape,
  };
}

export interface LatticeChunkGrads {
  dk: Float64Array; dv: Float64Array; dq: Float64Array; dalpha: Float64Array; dS: Float64Array;
}

/** Exact backward of latticeChunkStartGd for upstream dy and ∂L/∂(final S) (zero when absent). */
export function latticeChunkStartGdBackward(fw: LatticeChunkForward, inp: InnerInputs, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): LatticeChunkGrads {
  const { d, seq_len: s } = cfg;
  const m = cfg.m_slots as number;
  const md = m * d;
  const g: LatticeChunkGrads = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d),
    dalpha: new Float64Array(s), dS: new Float64Array(md),
  };
  let Sh = adjointFrom(dFinal, "S", md); // ∂L/∂S_{t+1}
  let P = accBuffer(md); // ∂L/∂S_t through the running slot, built at token t
  const F = accBuffer(md); // ∂L/∂S_c through the data terms of the current chunk
  const scratch = latticeScratch(m, d);
  for (let t = s - 1; t >= 0; t--) {
    const f = chunkStart(t, C);
    g.dalpha[t] = latticeTokenBackward(fw, inp, cfg, dy, t, f, Sh, P, F, scratch, g.dk, g.dv, t * d);
    g.dq.set(scratch.dqt, t * d);
    if (t === f) {
      for (let i = 0; i < md; i++) P[i]! += F[i]!;
      F.fill(0);
    }
    [Sh, P] = [P, Sh];
  }
  g.dS.set(Sh);
  return g;
}
