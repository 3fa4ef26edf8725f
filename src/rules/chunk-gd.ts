/**
 * Chunk-start GD for every memory rule (docs/spec/chunk-forms.md#chunk-start-gd): the matrix
 * family from its `matrixChunk` declaration — the error-writing rules (Delta, Titans) in their own
 * arithmetic (src/rules/chunk-error.ts), the state-free writes (Hebbian, Atlas) as tape ops
 * (src/rules/chunk-matrix.ts, which also holds the tape form of all four, the oracle of the
 * former) — the MLP memories from their shared inner-gradient pieces (src/rules/chunk-mlp.ts),
 * Lattice and Trellis from their own steps (src/rules/chunk-lattice.ts, chunk-trellis.ts).
 */
import { chunkStartGd, type ChunkRun } from "./chunk-matrix.ts";
import { errorChunkStartGd, errorChunkStartGdBackward, hasErrorChunk } from "./chunk-error.ts";
import { hasMlpChunk, mlpChunkStartGd, mlpChunkStartGdBackward } from "./chunk-mlp.ts";
import { latticeChunkStartGd, latticeChunkStartGdBackward } from "./chunk-lattice.ts";
import { trellisChunkStartGd, trellisChunkStartGdBackward } from "./chunk-trellis.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "./types.ts";
import type { Tensor } from "../tensor.ts";

export function hasChunkStartGd(decl: RuleDecl): boolean {
  return decl.matrixChunk !== undefined || hasMlpChunk(decl) || decl.key === "lattice" || decl.key === "trellis";
}

/** Whether the rule's write reads the state (else chunk-start GD is the sequential rule for every C). */
export function writeReadsState(decl: RuleDecl): boolean {
  return decl.matrixChunk === undefined || decl.matrixChunk.write === "error";
}

export function chunkStartGdForward(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number): ChunkRun {
  if (hasErrorChunk(decl)) {
    const r = errorChunkStartGd(decl, inp, state, cfg, C);
    return { y: r.y, finalState: { ...r.finalState } };
  }
  if (decl.matrixChunk !== undefined) return chunkStartGd(decl, inp, state, C);
  const r = decl.key === "lattice" ? latticeChunkStartGd(inp, state, cfg, C)
    : decl.key === "trellis" ? trellisChunkStartGd(inp, state, cfg, C)
    : mlpChunkStartGd(decl, inp, state, cfg, C);
  return { y: r.y, finalState: { ...r.finalState } };
}

/**
 * Gradients of sum(y ⊙ dy) + Σ_n ⟨final_n, dFinal_n⟩ from a rule's hand-written chunk-start GD
 * backward, named by input (k, v, q, x, alpha, theta, eta) and `state.<name>`; undefined for
 * Hebbian and Atlas, whose chunk-start GD is tape ops (the tape gives its backward).
 */
export function chunkStartGdGrads(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number,
  dy: Tensor, dFinal?: State): Record<string, Float64Array> | undefined {
  if (hasErrorChunk(decl)) return errorChunkStartGdBackward(errorChunkStartGd(decl, inp, state, cfg, C), inp, cfg, C, dy, dFinal);
  if (decl.matrixChunk !== undefined) return undefined;
  if (decl.key === "lattice") {
    const g = latticeChunkStartGdBackward(latticeChunkStartGd(inp, state, cfg, C), inp, cfg, C, dy, dFinal);
    return { k: g.dk, v: g.dv, q: g.dq, alpha: g.dalpha, "state.S": g.dS };
  }
  if (decl.key === "trellis") {
    const g = trellisChunkStartGdBackward(trellisChunkStartGd(inp, state, cfg, C), inp, cfg, C, dy, dFinal);
    return { k: g.dk, v: g.dv, q: g.dq, x: g.dx, alpha: g.dalpha, theta: g.dtheta, "state.S_K": g.dS_K, "state.S_V": g.dS_V };
  }
  const g = mlpChunkStartGdBackward(decl, mlpChunkStartGd(decl, inp, state, cfg, C), inp, state, cfg, C, dy, dFinal);
  return { k: g.dk, v: g.dv, q: g.dq, alpha: g.dalpha, theta: g.dtheta, "state.W1": g.dW1, "state.W2": g.dW2 };
}
