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
import { seqSpecs, type KernelSeq } from "../../../cases/kernel-seq.ts";
import { innerCase, type InnerCase } from "../../../cases/inner-case.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "../../../src/rules/types.ts";
import { Tensor, cast } from "../../../src/tensor.ts";
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

/**
 * Rounded once to the kernel's dtype (f32, or the bf16/f16 it declares; docs/spec/precision.md#plain),
 * held in f32, and the same values in f64: kernel, plain reference and ref64 all see identical inputs.
 */
function pairOf(t: Tensor, dtype: StorageDType): { t32: Tensor; t64: Tensor } {
  const t32 = cast(t, "f32");
  if (dtype !== "f32") for (let i = 0; i < t32.data.length; i++) t32.data[i] = roundTo(dtype, t32.data[i]!);
  return { t32, t64: cast(t32, "f64") };
}

/** One sequence of an abi case: the inner inputs (or q, frozen), the state, dy and d(final state), in f32 and f64. */
export type Seq = KernelSeq<"abi">;

function pairs(rec: Readonly<Record<string, Tensor>>, dtype: StorageDType): { r32: Record<string, Tensor>; r64: Record<string, Tensor> } {
  const r32: Record<string, Tensor> = {}, r64: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(rec)) ({ t32: r32[n]!, t64: r64[n]! } = pairOf(t, dtype));
  return { r32, r64 };
}

/** The f32 kernel precision: what a caller that names none gets. */
const F32: Pick<Precision, "storage" | "state"> = { storage: "f32", state: "f32" };

/** Sequence n's values in the abi form: its rule case's values (`h`: its head, n mod H) rounded to the kernel's dtypes, in f32 and f64. */
function abiSequence(c: InnerCase, h: number, p: Pick<Precision, "storage" | "state"> = F32): Seq {
  const inp = pairs(c.inputs as unknown as Record<string, Tensor>, p.storage), st = pairs(c.state, p.state), dF = pairs(c.dFinal ?? {}, p.state);
  const dy = pairOf(c.dy, p.storage);
  return {
    T: c.cfg.seq_len, h, cfg: c.cfg, in32: inp.r32 as unknown as InnerInputs, in64: inp.r64 as Record<string, Tensor> & InnerInputs, st32: st.r32, st64: st.r64,
    dy32: dy.t32, dy64: dy.t64, dFinal32: dF.r32, dFinal64: dF.r64,
  };
}

/** The batch's B·H sequences (one config: the extras change seeds, gates and state only). */
export function sequencesOf(decl: RuleDecl, k: AbiCaseSpec, frozen: boolean, p?: Pick<Precision, "storage" | "state">): { seqs: Seq[]; cfg: RuleConfig; shape: Shape } {
  const seqs = seqSpecs(k.base, k.extra, k.B * k.H).map((s, n) => abiSequence(innerCase(decl, s, frozen), n % k.H, p));
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
