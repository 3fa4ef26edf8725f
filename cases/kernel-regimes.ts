/**
 * The shapes a kernel case is drawn at (docs/spec/conformance.md#regime, docs/spec/py-backend.md#packed):
 * the lengths that straddle a chunk boundary, the shape regimes of the regime profile and their
 * generators, packed variable-length batches, and how a regime case's batches make one verdict.
 */
import * as fc from "fast-check";
import type { CaseVerdict } from "../oracle/compare.ts";

/** The sequence lengths that straddle a chunk of C tokens: one short of it, exactly it, one over, two chunks and one (docs/spec/conformance.md#regime). */
export const boundaryLengths = (C: number): number[] => [C - 1, C, C + 1, 2 * C + 1].filter((T) => T >= 1);

/**
 * The shape regimes of the regime profile (docs/spec/conformance.md#regime): each names the sizes
 * where one kind of kernel bug shows. Every regime's T straddles a chunk boundary except `long`,
 * whose T is in the thousands.
 */
export const REGIMES = ["boundary", "wide", "heads", "long"] as const;
export type Regime = (typeof REGIMES)[number];

/** The regimes a rule's kernels are judged in: REGIMES, less `long` where the rule declares why not (RuleDecl.longRegime). */
export function regimesOf(decl: { readonly longRegime?: string }): Regime[] {
  return REGIMES.filter((r) => r !== "long" || decl.longRegime === undefined);
}

/** A regime case's outcome with the regimes the rule's declaration leaves out named (details.regimes_not_judged). */
export function withRegimesNotJudged<O extends { details?: Readonly<Record<string, unknown>> }>(o: O, decl: { readonly longRegime?: string }): O {
  return decl.longRegime === undefined ? o : { ...o, details: { ...(o.details ?? {}), regimes_not_judged: { long: decl.longRegime } } };
}

/** Head sizes where tiles split: powers of two of production kernels, and 48, 60, 100, which fill no power-of-two block (unmasked loads read past an end there; docs/spec/conformance.md#regime). */
export const WIDE_D: readonly number[] = [64, 96, 128, 256, 48, 60, 100];
/**
 * The wide regime's d: a size above one 64-wide tile four times in five, so that a tile bug that shows
 * only above 64 is missed by a 3-case regime run at (1/5)^3 = 0.8 % of seeds (uniform over WIDE_D,
 * 3 of whose 7 sizes are <= 64: (3/7)^3 = 7.9 %).
 */
const wideD = fc.oneof(
  { arbitrary: fc.constantFrom(...WIDE_D.filter((d) => d > 64)), weight: 4 },
  { arbitrary: fc.constantFrom(...WIDE_D.filter((d) => d <= 64)), weight: 1 },
);
/** Head counts of the heads regime (one just above 8, where a stride bug of 8 heads shows) and B·H ≥ HEADS_MIN_SEQS. */
export const MANY_HEADS: readonly number[] = [9, 12, 16];
export const HEADS_MIN_SEQS = 32;
/** The long regime's lengths. */
export const LONG_T: [number, number] = [1000, 1040];

/** The sizes of one batch of a regime: B, T, H, d and the chunk size C its T straddles. */
export interface RegimeShape {
  readonly regime: Regime;
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly d: number;
  readonly C: number;
}

/**
 * One regime's shapes at the kernel's chunk sizes (shrinking moves toward the first chunk size,
 * the first boundary length, the smallest d and H): boundary — T ∈ boundaryLengths(C), d ≤ 12,
 * H ≤ 2; wide — d ∈ WIDE_D, T = C + 1; heads — H ∈ MANY_HEADS, B = ⌈32/H⌉, T = C + 1, d ≤ 8;
 * long — T ∈ LONG_T, d ≤ 4.
 */
export function regimeShapeArb(regime: Regime, chunks: readonly number[]): fc.Arbitrary<RegimeShape> {
  const C = fc.constantFrom(...chunks);
  switch (regime) {
    case "boundary":
      return fc.record({ C, at: fc.integer({ min: 0, max: 3 }), d: fc.integer({ min: 1, max: 12 }), H: fc.integer({ min: 1, max: 2 }), B: fc.integer({ min: 1, max: 2 }) })
        .map(({ C, at, d, H, B }) => ({ regime, B, T: boundaryLengths(C)[Math.min(at, boundaryLengths(C).length - 1)]!, H, d, C }));
    case "wide":
      return fc.record({ C, d: wideD }).map(({ C, d }) => ({ regime, B: 1, T: C + 1, H: 1, d, C }));
    case "heads":
      return fc.record({ C, H: fc.constantFrom(...MANY_HEADS), d: fc.integer({ min: 1, max: 8 }) })
        .map(({ C, H, d }) => ({ regime, B: Math.ceil(HEADS_MIN_SEQS / H), T: C + 1, H, d, C }));
    case "long":
      return fc.record({ C, T: fc.integer({ min: LONG_T[0], max: LONG_T[1] }), d: fc.integer({ min: 1, max: 4 }) })
        .map(({ C, T, d }) => ({ regime, B: 1, T, H: 1, d, C }));
  }
}

/**
 * A regime case (one batch per regime, REGIMES order) as one verdict: the first regime that fails,
 * named with its shape; else, when every regime compared only near-zero values, vacuous; else the
 * regime with the largest error (a vacuous regime beside informative ones is not a failure: its
 * values are judged again at the next case).
 */
export function regimeOutcome(outs: readonly CaseVerdict[], shapes: readonly ((Omit<RegimeShape, "regime"> & { regime?: Regime }) | PackedShape)[]): CaseVerdict {
  const label = (i: number) => {
    const k = shapes[i]!;
    // a packed batch (py: kernels that take cu_seqlens) names its layout; the others their regime (REGIMES in order unless given)
    return "lengths" in k
      ? `regime packed (${packedLabel(k.lengths)} H=${k.H} d=${k.d} C=${k.C})`
      : `regime ${k.regime ?? REGIMES[i]} (B=${k.B} T=${k.T} H=${k.H} d=${k.d} C=${k.C})`;
  };
  const bad = outs.findIndex((o) => !o.ok && o.vacuous !== true);
  if (bad >= 0) return { ...outs[bad]!, message: `${label(bad)}: ${outs[bad]!.message ?? "failed"}` };
  const informative = outs.map((o, i) => [o, i] as const).filter(([o]) => o.vacuous !== true);
  if (informative.length === 0) return { ok: true, vacuous: true, message: outs.map((o, i) => `${label(i)}: ${o.message ?? "vacuous"}`).join("; ") };
  const [worst, i] = informative.reduce((a, b) => ((b[0].worst?.abs ?? 0) > (a[0].worst?.abs ?? 0) ? b : a));
  return { ...worst, details: { ...(worst.details ?? {}), regime: label(i) } };
}

/** How messages name a packed layout: `packed: {sequences: 3, lengths: [15, 1, 17]}`. */
export const packedLabel = (lengths: readonly number[]): string => `packed: {sequences: ${lengths.length}, lengths: [${lengths.join(", ")}]}`;

/**
 * A packed variable-length batch (docs/spec/py-backend.md#packed): B = 1, N sequences of different
 * lengths concatenated along T, with the offsets `cu_seqlens` = [0, L1, L1 + L2, ...] (the
 * convention of flash-linear-attention), one initial and one final state per sequence. Its
 * sequence n = i·H + h is packed sequence i, head h.
 */
export interface PackedShape {
  /** The packed sequences' lengths, in packing order. */
  readonly lengths: readonly number[];
  readonly H: number;
  readonly d: number;
  /** The chunk size the lengths straddle. */
  readonly C: number;
}

/** The most packed sequences a packed batch holds, and its most heads. */
export const PACKED_MAX_SEQUENCES = 5;
export const PACKED_MAX_H = 2;

/**
 * The packed regime's shapes (docs/spec/py-backend.md#packed): a length-1 sequence at a random place
 * among two to four lengths straddling a chunk boundary (C − 1, C, C + 1, 2C + 1, each at most
 * once), H ≤ 2, d ≤ 12. Shrinking drops lengths and moves toward the first chunk size, H = 1, small d.
 */
export function packedShapeArb(chunks: readonly number[]): fc.Arbitrary<PackedShape> {
  return fc.record({
    C: fc.constantFrom(...chunks), picks: fc.shuffledSubarray([0, 1, 2, 3], { minLength: 2 }), one: fc.nat({ max: 4 }),
    H: fc.integer({ min: 1, max: PACKED_MAX_H }), d: fc.integer({ min: 1, max: 12 }),
  }).map(({ C, picks, one, H, d }) => ({ lengths: packedLengths(C, picks, one), H, d, C }));
}

/** The packed lengths of packedShapeArb: boundaryLengths(C) at the indices `picks`, in that order, with a 1 inserted at index `one` (at most at the end). */
export function packedLengths(C: number, picks: readonly number[], one: number): number[] {
  const straddle = boundaryLengths(C);
  const lengths = picks.map((i) => straddle[Math.min(i, straddle.length - 1)]!);
  lengths.splice(Math.min(one, lengths.length), 0, 1);
  return lengths;
}

/** The most sequences a regime batch holds (MANY_HEADS with B = ⌈32/H⌉). */
export const REGIME_MAX_SEQS = Math.max(...MANY_HEADS.map((H) => Math.ceil(HEADS_MIN_SEQS / H) * H));
