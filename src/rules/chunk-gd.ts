/**
 * Chunk-start GD for every rule that has it (docs/spec/chunk-forms.md#chunk-start-gd): the matrix
 * family from its `matrixChunk` declaration (tape ops, src/rules/chunk-matrix.ts), the MLP memories
 * from their shared inner-gradient pieces (hand-written backward, src/rules/chunk-mlp.ts).
 */
import { chunkStartGd, type ChunkRun } from "./chunk-matrix.ts";
import { hasMlpChunk, mlpChunkStartGd } from "./chunk-mlp.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "./types.ts";

export function hasChunkStartGd(decl: RuleDecl): boolean {
  return decl.matrixChunk !== undefined || hasMlpChunk(decl);
}

/** Whether the rule's write reads the state (else chunk-start GD is the sequential rule for every C). */
export function writeReadsState(decl: RuleDecl): boolean {
  return decl.matrixChunk === undefined || decl.matrixChunk.write === "error";
}

export function chunkStartGdForward(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number): ChunkRun {
  if (decl.matrixChunk !== undefined) return chunkStartGd(decl, inp, state, C);
  const r = mlpChunkStartGd(decl, inp, state, cfg, C);
  return { y: r.y, finalState: { ...r.finalState } };
}
