/**
 * The sequences of an abi case (cases/kernel-batch.ts AbiCaseSpec: the native ABI's batch of B·H
 * independent sequences of one rule variant, a checkpoint interval C, dy and d(final state) given or
 * NULL): each sequence f32 for the kernel and the f32 reference, and the same values in f64 for the
 * f64 reference, packed into the ABI's tensors. Sequence n = b·H + h sits at [b, :, h] of the ABI's
 * [B, T, H, d] tensors (docs/spec/kernel-abi.md#shapes).
 */
import * as fc from "fast-check";
import type { RuleAbi, Shape } from "../../../ffi/abi.ts";
import { SATURATED_GATES, SATURATED_THETA, saturatedCorner, saturatedThetaTop } from "../../../cases/edge-gates.ts";
import type { Arrays } from "../../../ffi/lib-types.ts";
import { caseArb, type AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { packStates, packTokens, tokenWidth } from "../../../cases/kernel-layout.ts";
import { kernelSequence, seqSpecs, type KernelSeq } from "../../../cases/kernel-seq.ts";
import { innerCase } from "../../../cases/inner-case.ts";
import type { RuleConfig, RuleDecl, State } from "../../../src/rules/types.ts";
import type { Tensor } from "../../../src/tensor.ts";
import { roundTo, type Precision, type StorageDType } from "../../../src/precision.ts";

/** bench/ and fixtures/ name the abi case record so (cases/kernel-batch.ts AbiCaseSpec). */
export type KSpec = AbiCaseSpec;

/** Every sequence's alpha and theta at its corner (in place): alpha 1 or 0, theta 1 − 2^-8 (over the rule's step scale) or 2^-14, rounded to `storage`. */
function saturateSeqs(decl: RuleDecl, seqs: Seq[], cfg: RuleConfig, storage: StorageDType): void {
  const top = roundTo(storage, saturatedThetaTop(decl, cfg));
  seqs.forEach((s, n) => {
    const { alphaHigh, thetaHigh } = saturatedCorner(n);
    for (const g of SATURATED_GATES) {
      const t32 = (s.in32 as unknown as Record<string, Tensor | undefined>)[g];
      if (t32 === undefined) continue;
      const v = g === "alpha" ? (alphaHigh ? 1 : 0) : (thetaHigh ? top : SATURATED_THETA.low);
      t32.data.fill(v);
      (s.in64 as unknown as Record<string, Tensor>)[g]!.data.fill(v);
    }
  });
}

/** The chunk check's fixed case (T = CHUNK_T tokens, d = 4, two heads, C = 4), drawn once with seed 1. */
export function chunkExample(decl: RuleDecl, T: number): AbiCaseSpec {
  const [k] = fc.sample(caseArb(decl, false, "default", "abi", { d: [4, 4], seq_len: [T, T] }), { seed: 1, numRuns: 1 });
  return { ...k!, B: 1, H: 2, C: 4, dyNull: false, dFinalNull: false };
}

/** One sequence of an abi case: the inner inputs (or q, frozen), the state, dy and d(final state), in f32 and f64. */
export type Seq = KernelSeq<"abi">;

/** The f32 kernel precision: what a caller that names none gets. */
const F32: Pick<Precision, "storage" | "state"> = { storage: "f32", state: "f32" };

/** The batch's B·H sequences (one config: the extras change seeds, gates and state only). */
export function sequencesOf(decl: RuleDecl, k: AbiCaseSpec, frozen: boolean, p?: Pick<Precision, "storage" | "state">): { seqs: Seq[]; cfg: RuleConfig; shape: Shape } {
  // sequence n's values: its rule case's (`h`: its head, n mod H), rounded through f32 to the kernel's dtypes, in f32 and f64
  const seqs = seqSpecs(k.base, k.extra, k.B * k.H).map((s, n) => {
    const c = innerCase(decl, s, frozen);
    return kernelSequence("abi", c, n % k.H, p ?? F32, { inputs: c.inputs as unknown as Record<string, Tensor>, dFinal: c.dFinal ?? {} });
  });
  const cfg = seqs[0]!.cfg;
  if (k.saturated === true) saturateSeqs(decl, seqs, cfg, p?.storage ?? "f32");
  return { seqs, cfg, shape: { B: k.B, T: cfg.seq_len, H: k.H, d: cfg.d } };
}

/** The batch's inputs [B, T, H, w]; `cfg` gives the rows per token of a tokenRows input (kernel-abi.md#token-rows). */
export function batchInputs(a: RuleAbi, seqs: Seq[], shape: Shape, cfg?: RuleConfig): Arrays {
  const out: Arrays = {};
  for (const n of a.inputs) out[n] = tokens(seqs.map((s) => s.in32[n]!.data), shape, tokenWidth(a, n, shape.d, cfg));
  return out;
}

export function batchState(names: readonly string[], states: State[]): Arrays {
  const out: Arrays = {};
  for (const n of names) {
    const parts = states.map((s) => s[n]!.data);
    out[n] = packStates(parts, new Float32Array(parts.reduce((a, p) => a + p.length, 0)));
  }
  return out;
}

/** Per-sequence [T, w] arrays as one f32 ABI tensor [B, T, H, w]. */
const tokens = (parts: ArrayLike<number>[], shape: Shape, w: number): Float32Array => packTokens(parts, shape, w, new Float32Array(shape.B * shape.T * shape.H * w));

export const batchQ = (seqs: Seq[], shape: Shape): Float32Array => tokens(seqs.map((s) => s.in32.q.data), shape, shape.d);
export const batchDy = (seqs: Seq[], shape: Shape): Float32Array => tokens(seqs.map((s) => s.dy32.data), shape, shape.d);
