/**
 * The child's cases: a batch of B·H independent sequences of one rule variant (B ∈ 1..3 batches,
 * H ∈ {1, 2} heads; the base case of the rule registry's generator plus sequences with their own
 * seed, gates and state), a checkpoint interval C ∈ {1, 4, 16}, and whether dy and d(final state)
 * are given or NULL (= zero). Each sequence is f32 for the kernel and the f32 reference, and the same
 * values in f64 for the f64 reference. Sequence n = b·H + h sits at [b, :, h] of the ABI's
 * [B, T, H, d] tensors (docs/spec/kernel-abi.md#shapes).
 */
import * as fc from "fast-check";
import { abiOf, type RuleAbi, type Shape } from "../../ffi/abi.ts";
import { SATURATED_GATES, SATURATED_TAIL, SATURATED_THETA, saturatedCorner, saturatedThetaTop } from "../../cases/edge-gates.ts";
import type { Arrays } from "../../ffi/lib.ts";
import type { Profile } from "../../harness/check.ts";
import { innerCase } from "../../cases/inner-case.ts";
import { ODD_KEY_D, seqExtraArb, seqExtrasArb, type SeqExtra } from "../../cases/kernel-batch.ts";
import { REGIME_MAX_SEQS, regimesOf, regimeShapeArb, type Regime } from "../../cases/kernel-regimes.ts";
import { packStates, packTokens, tokenWidth } from "../../cases/kernel-layout.ts";
import { isStateTensor, mapSeq } from "../../cases/kernel-tensors.ts";
import type { SeqTensors } from "../../oracle/kernel-case.ts";
import { otherEnumValues, regimeCase, ruleCaseSpecArb, type RuleCaseSpec, type SizeLimits } from "../../cases/rule-case.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { Tensor, cast } from "../../src/tensor.ts";
import { roundTo, roundedCopy, type Precision, type StorageDType } from "../../src/precision.ts";

/** The checkpoint intervals C5 runs (docs/spec/kernel-abi.md#checkpointing). */
export const CHECKPOINTS = [1, 4, 16] as const;

/** A batch: the base case plus up to five more sequences, the heads, C, and which upstream gradients are NULL. */
export interface KSpec {
  base: RuleCaseSpec;
  B: number;
  H: number;
  C: number;
  extra: SeqExtra[];
  dyNull: boolean;
  dFinalNull: boolean;
  /** The declared saturated case (cases/edge-gates.ts): every sequence's alpha and theta at a corner; absent: as generated. */
  saturated?: boolean;
}

export function sizesFor(profile: Profile): SizeLimits {
  // T up to 20: longer than one chunk at C = 4 and C = 16
  return profile === "deep" ? { d: [1, 12], seq_len: [1, 24] } : { d: [1, 12], seq_len: [1, 20] };
}

export function batchArb(decl: RuleDecl, frozen: boolean, profile: Profile, sizes?: SizeLimits): fc.Arbitrary<KSpec> {
  let base = ruleCaseSpecArb(decl, sizes ?? sizesFor(profile));
  // deep adds sizes that are odd and not a multiple of 32, above one warp (a fixed T stays fixed)
  const wide: SizeLimits = { d: [33, 40], seq_len: sizes?.seq_len ?? [1, 6] };
  if (profile === "deep") base = fc.oneof({ weight: 4, arbitrary: base }, { weight: 1, arbitrary: ruleCaseSpecArb(decl, wide) });
  const extra = seqExtraArb(["init", "random"]);
  // mostly given: a NULL upstream gradient is one case in five
  const nullable = fc.integer({ min: 0, max: 4 }).map((i) => i === 0);
  return fc.record({
    base, B: fc.integer({ min: 1, max: 3 }), H: fc.constantFrom(1, 2), C: fc.constantFrom(...CHECKPOINTS),
    extra: fc.array(extra, { minLength: 5, maxLength: 5 }), dyNull: nullable, dFinalNull: nullable,
  }).map((k) => (frozen ? frozenReads(k) : k));
}

/**
 * A frozen read of a zero state reads zero: frozen variants read random states. A frozen read has
 * no d(final state), so with dy NULL its whole backward is zero and the case compares nothing
 * (atlas.frozen's gpu-blocks at 2 runs gave up on such cases at 1 seed in 40): dy is always given.
 */
function frozenReads(k: KSpec): KSpec {
  return { ...k, base: { ...k.base, state: "random" as const }, extra: k.extra.map((e) => ({ ...e, state: "random" as const })), dyNull: false };
}

/**
 * One batch of a shape regime (docs/spec/conformance.md#regime) at the kernel's chunk sizes: the
 * rule's generated case with d and T set by the regime (never below the rule's check minimums),
 * B·H sequences with their own seeds, gates and states, and the checkpoint interval C the chunk
 * size the regime's T straddles.
 */
export function regimeBatchArb(decl: RuleDecl, frozen: boolean, regime: Regime, chunks: readonly number[]): fc.Arbitrary<KSpec> {
  const nullable = fc.integer({ min: 0, max: 4 }).map((i) => i === 0);
  return fc.record({
    base: ruleCaseSpecArb(decl, { d: [1, 4], seq_len: [1, 4] }), shape: regimeShapeArb(regime, chunks),
    extra: seqExtrasArb(REGIME_MAX_SEQS - 1, ["init", "random"]),
    dyNull: nullable, dFinalNull: nullable,
  }).map(({ base, shape, extra, dyNull, dFinalNull }) => {
    const sized = regimeCase(decl, base, shape);
    const k: KSpec = { base: sized, B: shape.B, H: shape.H, C: shape.C, extra, dyNull, dFinalNull };
    return frozen ? frozenReads(k) : k;
  });
}

/** A case of the regime profile: one batch of every regime, in REGIMES order. */
export const regimeArb = (decl: RuleDecl, frozen: boolean, chunks: readonly number[]): fc.Arbitrary<KSpec[]> =>
  fc.tuple(...regimesOf(decl).map((r) => regimeBatchArb(decl, frozen, r, chunks)));

/**
 * The declared boundary case every kernel check of the default and deep profiles runs first
 * (docs/spec/conformance.md#regime): T = C + 1 at the kernel's chunk size C, checkpoint interval C,
 * d = 4, one batch of two heads, dy and d(final state) given. Fixed values, drawn once from the
 * generator with seed 1.
 */
export function boundaryExample(decl: RuleDecl, frozen: boolean, C: number): KSpec {
  const [k] = fc.sample(batchArb(decl, frozen, "default", { d: [4, 4], seq_len: [C + 1, C + 1] }), { seed: 1, numRuns: 1 });
  return { ...k!, B: 1, H: 2, C, dyNull: false, dFinalNull: false };
}

/** The declared guard case (docs/spec/hazards.md#odd-key): d = ODD_KEY_D, T = 3 (or the rule's minimum), B = 1, H = 2, at checkpoint interval C. */
export function oddKeyExample(decl: RuleDecl, frozen: boolean, C: number): KSpec {
  const T = Math.max(3, decl.checkMinimums?.seq_len ?? 1);
  const [k] = fc.sample(batchArb(decl, frozen, "default", { d: [ODD_KEY_D, ODD_KEY_D], seq_len: [T, T] }), { seed: 3, numRuns: 1 });
  return { ...k!, B: 1, H: 2, C, dyNull: false, dFinalNull: false };
}

/**
 * The declared saturated case (docs/spec/conformance.md#regime, cases/edge-gates.ts) of an active pair
 * that reads alpha or theta: T = C + SATURATED_TAIL, d = 4, B = 2, H = 2 at checkpoint interval C, each
 * sequence's alpha and theta at a corner (null for a frozen read or a rule with neither gate).
 */
export function saturatedExample(decl: RuleDecl, frozen: boolean, C: number): KSpec | null {
  const reads = abiOf(decl.key)?.inputs ?? [];
  if (frozen || !SATURATED_GATES.some((g) => reads.includes(g))) return null;
  const T = Math.max(C + SATURATED_TAIL, decl.checkMinimums?.seq_len ?? 1);
  const [k] = fc.sample(batchArb(decl, false, "default", { d: [4, 4], seq_len: [T, T] }), { seed: 4, numRuns: 1 });
  return { ...k!, B: 2, H: 2, C, dyNull: false, dFinalNull: false, saturated: true };
}

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

/**
 * A check's fixed examples: `first`, then the same batch at every other value of each enumerated
 * hyperparameter (cases/rule-case.ts otherEnumValues). A frozen read writes nothing, so its
 * enumerated write variants are not repeated.
 */
export function withEnumExamples(decl: RuleDecl, frozen: boolean, first: KSpec): KSpec[] {
  return frozen ? [first] : [first, ...otherEnumValues(decl, first.base).map((base) => ({ ...first, base }))];
}

/** The chunk check's fixed case (T = CHUNK_T tokens, d = 4, two heads, C = 4), drawn once with seed 1. */
export function chunkExample(decl: RuleDecl, T: number): KSpec {
  const [k] = fc.sample(batchArb(decl, false, "default", { d: [4, 4], seq_len: [T, T] }), { seed: 1, numRuns: 1 });
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

/** One sequence: the inner inputs (or q, frozen), the state, dy and d(final state), in f32 and f64. */
export interface Seq {
  cfg: RuleConfig;
  in32: InnerInputs;
  in64: InnerInputs;
  st32: State;
  st64: State;
  dy32: Tensor;
  dy64: Tensor;
  dFinal32: State;
  dFinal64: State;
}

function pairs(rec: Readonly<Record<string, Tensor>>, dtype: StorageDType): { r32: Record<string, Tensor>; r64: Record<string, Tensor> } {
  const r32: Record<string, Tensor> = {}, r64: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(rec)) ({ t32: r32[n]!, t64: r64[n]! } = pairOf(t, dtype));
  return { r32, r64 };
}

/** The f32 kernel precision: what a caller that names none gets. */
const F32: Pick<Precision, "storage" | "state"> = { storage: "f32", state: "f32" };

export function sequence(decl: RuleDecl, spec: RuleCaseSpec, frozen: boolean, p: Pick<Precision, "storage" | "state"> = F32): Seq {
  const c = innerCase(decl, spec, frozen);
  const inp = pairs(c.inputs as unknown as Record<string, Tensor>, p.storage), st = pairs(c.state, p.state), dF = pairs(c.dFinal ?? {}, p.state);
  const dy = pairOf(c.dy, p.storage);
  return {
    cfg: c.cfg, in32: inp.r32 as unknown as InnerInputs, in64: inp.r64 as unknown as InnerInputs, st32: st.r32, st64: st.r64,
    dy32: dy.t32, dy64: dy.t64, dFinal32: dF.r32, dFinal64: dF.r64,
  };
}

/**
 * A plain reference's outputs as the kernel stores them: per-token tensors and gates (y, dk, dalpha,
 * ...) rounded to the storage dtype, states and state gradients to the state dtype. Identity for f32.
 */
export function asStored(rec: SeqTensors, p: Pick<Precision, "storage" | "state">): SeqTensors {
  if (p.storage === "f32" && p.state === "f32") return rec;
  return mapSeq(rec, (a, k) => roundedCopy(isStateTensor(k) ? p.state : p.storage, a));
}

/** The batch's B·H sequences (one config: the extras change seeds, gates and state only). */
export function sequencesOf(decl: RuleDecl, k: KSpec, frozen: boolean, p?: Pick<Precision, "storage" | "state">): { seqs: Seq[]; cfg: RuleConfig; shape: Shape } {
  const n = k.B * k.H;
  const specs = [k.base, ...k.extra.slice(0, n - 1).map((e) => ({ ...k.base, ...e }))];
  const seqs = specs.map((s) => sequence(decl, s, frozen, p));
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
