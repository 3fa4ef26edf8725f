/**
 * A kernel case's batch (docs/spec/kernel-abi.md#shapes): B·H independent sequences, sequence
 * n = b·H + h, the first the rule registry's generated case and the others its own seed, gate
 * levels and initial state (SeqExtra). One record (KernelCaseSpec) for every backend, drawn by one
 * set of generators (generated, regime and declared cases) parametrised by the case form the
 * backend takes (CaseForm); the run counts and the declared sizes every kernel check shares.
 * What goes with it lives beside it, one concern a module:
 *
 *   cases/kernel-regimes.ts   the shapes a case is drawn at: regimes, chunk boundaries, packed batches
 *   cases/kernel-layout.ts    the ABI's and the canonical layout's packing and unpacking of sequences
 *   cases/kernel-tensors.ts   a case's tensors by what they are (TensorKey), their report names, the judge's items
 *   cases/kernel-shapes.ts    the shapes a check ran (details.shapes)
 */
import * as fc from "fast-check";
import { abiOf } from "../ffi/abi.ts";
import { Rng } from "../src/rng.ts";
import type { RuleDecl } from "../src/rules/types.ts";
import { SATURATED_GATES, SATURATED_TAIL } from "./edge-gates.ts";
import { PACKED_MAX_H, PACKED_MAX_SEQUENCES, REGIME_MAX_SEQS, packedShapeArb, regimeShapeArb, regimesOf, type Regime } from "./kernel-regimes.ts";
import { clampHyper, otherEnumValues, regimeCase, ruleCaseSpecArb, type ALPHA_LEVELS, type RuleCaseSpec, type SizeLimits, type THETA_LEVELS } from "./rule-case.ts";

/** Generated cases per check and profile (harness/check.ts ProfileRuns: regime optional). */
export type Runs = Readonly<Record<"quick" | "default" | "deep", number>> & { readonly regime?: number };
/**
 * The kernel checks' run counts (forward, backward; C5 and py:). A regime case is one batch per
 * regime (REGIMES), so three cases judge every regime three times.
 */
export const RUNS: Runs = { quick: 5, default: 30, deep: 300, regime: 3 };

/**
 * The key size of the declared guard case every kernel check (C5, native and py:) runs after its
 * other declared cases: 5, the smallest above 4 that is not a power of two, where a kernel working
 * in blocks of 8 lanes reads past an input's end unless it masks its loads (docs/spec/hazards.md#odd-key).
 * Its batch: T = 3 (or the rule's minimum), B = 1, H = 2.
 */
export const ODD_KEY_D = 5;

/**
 * The chunk sizes a kernel is judged at when it declares none (docs/spec/kernel-abi.md#chunk-sizes):
 * the sizes the field's chunked kernels use.
 */
export const DEFAULT_KERNEL_CHUNKS: readonly number[] = [16, 64];

/** A sequence of a batch beyond the first: the first's rule case with its own seed, gate levels and initial state. */
export interface SeqExtra {
  seed: number;
  alpha: keyof typeof ALPHA_LEVELS;
  theta: keyof typeof THETA_LEVELS;
  state: "init" | "random";
}

/** The generator of a batch's other sequences (`states`: the initial states, in the order fast-check draws them). */
export function seqExtraArb(states: readonly SeqExtra["state"][]): fc.Arbitrary<SeqExtra> {
  return fc.record({
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
    alpha: fc.constantFrom<SeqExtra["alpha"]>("mid", "low", "high"),
    theta: fc.constantFrom<SeqExtra["theta"]>("small", "large"),
    state: fc.constantFrom<SeqExtra["state"]>(...states),
  });
}

/**
 * `count` other sequences drawn from one seed (a regime batch's many heads): each with its own seed,
 * gate levels and initial state, without a shrinkable value per sequence — shrinking a batch works
 * on its shape and its first sequence, not on 35 seeds.
 */
export function seqExtrasArb(count: number, states: readonly SeqExtra["state"][]): fc.Arbitrary<SeqExtra[]> {
  const alphas = ["mid", "low", "high"] as const, thetas = ["small", "large"] as const;
  return fc.integer({ min: 1, max: 0x7fffffff }).map((seed) => {
    const rng = new Rng(seed);
    return Array.from({ length: count }, () => ({
      seed: rng.int(1, 0x7fffffff), alpha: alphas[rng.int(0, 2)]!, theta: thetas[rng.int(0, 1)]!, state: states[rng.int(0, states.length - 1)]!,
    }));
  });
}

/**
 * The form of the cases a backend takes, by the batch its kind receives (cases/kernel-backend.ts):
 *
 *   abi        a native library's packed f32 ABI batch (and an in-process kernel's, which takes the
 *              same): a checkpoint interval C, and dy and d(final state) each given or NULL
 *              (docs/spec/kernel-abi.md#backward); d(final state) is the rule case's own.
 *   canonical  a py: kernel's request in the canonical layout (docs/spec/py-backend.md#cases): dy and
 *              a random non-zero d(final state) of its own seed always given; packed batches and
 *              declared edges.
 *
 * The forms draw their values differently (a case's digest, details.case_digest, is the
 * fast-check text of its record): every generator below takes the form and draws it as before.
 */
export type CaseForm = "abi" | "canonical";

/** A declared edge of a canonical case (docs/spec/py-backend.md#edges). */
export type KernelEdge =
  /** Every sequence's α and θ at a corner of their range (sequence n: α → 1 for even n, θ → 1 for n mod 4 < 2). */
  | { readonly kind: "saturated" }
  /** The query scale passed to the kernel: a number, or d^-1/2 of the case's d. */
  | { readonly kind: "scale"; readonly scale: number | "rsqrt_dk" }
  /** A packed batch with empty sequences (equal offsets at the start, middle and end of cu_seqlens) and a length-1 one. */
  | { readonly kind: "empty" };

/**
 * One kernel case, whatever backend runs it: the first sequence's rule case, B batches × H heads,
 * the other B·H − 1 sequences, and the fields of its form (CaseForm), in the order the generators
 * write them.
 */
export interface KernelCaseSpec {
  base: RuleCaseSpec;
  B: number;
  H: number;
  /** abi: the checkpoint interval, and the chunk size the case's T straddles (docs/spec/kernel-abi.md#checkpointing). */
  C?: number;
  /** The other sequences (at least B·H − 1; a generated abi case draws five). */
  extra: SeqExtra[];
  /** abi: dy is NULL (= zero). */
  dyNull?: boolean;
  /** abi: d(final state) is NULL (= zero). */
  dFinalNull?: boolean;
  /** abi: the declared saturated case (cases/edge-gates.ts): every sequence's alpha and theta at a corner. */
  saturated?: boolean;
  /** canonical: the seed of the random, non-zero d(final state). */
  dFinalSeed?: number;
  /**
   * canonical: a packed variable-length batch (docs/spec/py-backend.md#packed): the lengths of its
   * sequences, concatenated along T with B = 1 (base.seq_len is the first's, or the first non-empty
   * one's; a length may be 0: an empty sequence, docs/spec/py-backend.md#edges); absent: B sequences of one length.
   */
  lengths?: number[];
  /** canonical: a declared edge case (docs/spec/py-backend.md#edges); absent: none. */
  edge?: KernelEdge;
}

/** An abi case: its checkpoint interval and NULL upstream gradients set. */
export type AbiCaseSpec = KernelCaseSpec & { C: number; dyNull: boolean; dFinalNull: boolean };

/** A rule case's hyperparameters as a message shows them, when it has any. */
const hyperText = (s: RuleCaseSpec): string => (Object.keys(s.hyper).length > 0 ? ` hyper ${JSON.stringify(s.hyper)}` : "");

/**
 * An abi case as a failure message names it: its sizes, the NULL upstream gradients and the first
 * sequence's seed (the other sequences' records stay out: the replay line rebuilds the whole case).
 */
export function describeAbiCase(k: AbiCaseSpec): string {
  const nulls = [...(k.dyNull ? ["dy"] : []), ...(k.dFinalNull ? ["d(final state)"] : [])];
  return `B=${k.B} H=${k.H} T=${k.base.seq_len} d=${k.base.d} C=${k.C}${hyperText(k.base)}${nulls.length > 0 ? ` ${nulls.join(", ")} NULL` : ""} seed=${k.base.seed}`;
}

/** One sequence's rule case as a failure message names it (tape-e2e). */
export function describeRuleCase(s: RuleCaseSpec): string {
  return `T=${s.seq_len} d=${s.d}${hyperText(s)} state ${s.state} seed=${s.seed}`;
}
/** A canonical case: the seed of its d(final state) set. */
export type CanonicalCaseSpec = KernelCaseSpec & { dFinalSeed: number };
/** The case record of a form. */
export type CaseOf<F extends CaseForm> = F extends "abi" ? AbiCaseSpec : CanonicalCaseSpec;

/** The profiles a generated case's sizes depend on (harness/check.ts Profile). */
type ProfileName = "quick" | "default" | "deep" | "regime";

/** The checkpoint intervals an abi case runs at (docs/spec/kernel-abi.md#checkpointing). */
export const CHECKPOINTS = [1, 4, 16] as const;

/** An abi case's sizes by profile: T up to 20, longer than one chunk at C = 4 and C = 16. */
export function sizesFor(profile: ProfileName): SizeLimits {
  return profile === "deep" ? { d: [1, 12], seq_len: [1, 24] } : { d: [1, 12], seq_len: [1, 20] };
}

/** The other sequences' initial states, in the order each form's generators draw them. */
const EXTRA_STATES: Readonly<Record<CaseForm, readonly SeqExtra["state"][]>> = { abi: ["init", "random"], canonical: ["random", "init"] };

/**
 * A frozen read of a zero state reads zero: an abi case of a frozen variant reads random states. A
 * frozen read has no d(final state), so with dy NULL its whole backward is zero and the case
 * compares nothing (atlas.frozen's gpu-blocks at 2 runs gave up on such cases at 1 seed in 40): dy is
 * always given. (A canonical case's frozen reads are set when it is built.)
 */
function frozenReads(k: AbiCaseSpec): AbiCaseSpec {
  return { ...k, base: { ...k.base, state: "random" as const }, extra: k.extra.map((e) => ({ ...e, state: "random" as const })), dyNull: false };
}

/** Mostly given: a NULL upstream gradient is one abi case in five. */
const nullable = () => fc.integer({ min: 0, max: 4 }).map((i) => i === 0);
const dFinalSeedArb = () => fc.integer({ min: 1, max: 0x7fffffff });

/**
 * The generated cases of a kernel check. abi: B ≤ 3, H ≤ 2, C ∈ CHECKPOINTS, five other sequences,
 * dy and d(final state) NULL one case in five each; d ≤ 12, T ≤ 20 (deep: T ≤ 24, and one case in
 * five at d ∈ 33..40, odd and not a multiple of 32, above one warp); `sizes` replaces the rule
 * case's sizes. canonical: B ≤ 2, H ≤ 2, three other sequences, d ≤ 12, T ≤ 6 (deep: 8).
 */
export function caseArb<F extends CaseForm>(decl: RuleDecl, frozen: boolean, profile: ProfileName, form: F, sizes?: SizeLimits): fc.Arbitrary<CaseOf<F>> {
  if (form === "canonical") {
    const base = ruleCaseSpecArb(decl, profile === "deep" ? { d: [1, 12], seq_len: [1, 8] } : { d: [1, 12], seq_len: [1, 6] });
    return fc.record({
      base, B: fc.integer({ min: 1, max: 2 }), H: fc.integer({ min: 1, max: 2 }),
      extra: fc.array(seqExtraArb(EXTRA_STATES.canonical), { minLength: 3, maxLength: 3 }), dFinalSeed: dFinalSeedArb(),
    }) as fc.Arbitrary<CaseOf<F>>;
  }
  let base = ruleCaseSpecArb(decl, sizes ?? sizesFor(profile));
  // deep adds sizes that are odd and not a multiple of 32, above one warp (a fixed T stays fixed)
  const wide: SizeLimits = { d: [33, 40], seq_len: sizes?.seq_len ?? [1, 6] };
  if (profile === "deep") base = fc.oneof({ weight: 4, arbitrary: base }, { weight: 1, arbitrary: ruleCaseSpecArb(decl, wide) });
  return fc.record({
    base, B: fc.integer({ min: 1, max: 3 }), H: fc.constantFrom(1, 2), C: fc.constantFrom(...CHECKPOINTS),
    extra: fc.array(seqExtraArb(EXTRA_STATES.abi), { minLength: 5, maxLength: 5 }), dyNull: nullable(), dFinalNull: nullable(),
  }).map((k) => (frozen ? frozenReads(k) : k)) as fc.Arbitrary<CaseOf<F>>;
}

/**
 * One batch of a shape regime (docs/spec/conformance.md#regime) at the kernel's chunk sizes: the
 * rule's generated case with d and T set by the regime (never below the rule's check minimums),
 * B·H sequences with their own seeds, gates and states; an abi case runs at checkpoint interval C,
 * the chunk size the regime's T straddles.
 */
export function regimeBatchArb<F extends CaseForm>(decl: RuleDecl, frozen: boolean, regime: Regime, chunks: readonly number[], form: F): fc.Arbitrary<CaseOf<F>> {
  const drawn = { base: ruleCaseSpecArb(decl, { d: [1, 4], seq_len: [1, 4] }), shape: regimeShapeArb(regime, chunks), extra: seqExtrasArb(REGIME_MAX_SEQS - 1, EXTRA_STATES[form]) };
  if (form === "canonical") {
    return fc.record({ ...drawn, dFinalSeed: dFinalSeedArb() })
      .map(({ base, shape, extra, dFinalSeed }) => ({ base: regimeCase(decl, base, shape), B: shape.B, H: shape.H, extra, dFinalSeed })) as fc.Arbitrary<CaseOf<F>>;
  }
  return fc.record({ ...drawn, dyNull: nullable(), dFinalNull: nullable() }).map(({ base, shape, extra, dyNull, dFinalNull }) => {
    const k: AbiCaseSpec = { base: regimeCase(decl, base, shape), B: shape.B, H: shape.H, C: shape.C, extra, dyNull, dFinalNull };
    return frozen ? frozenReads(k) : k;
  }) as fc.Arbitrary<CaseOf<F>>;
}

/**
 * One packed batch of the packed regime (docs/spec/py-backend.md#packed; canonical cases of a kernel
 * that takes `cu_seqlens`): a length-1 sequence among lengths straddling a chunk boundary, each
 * sequence with its own seed, gates and state.
 */
function packedBatchArb(decl: RuleDecl, chunks: readonly number[]): fc.Arbitrary<CanonicalCaseSpec> {
  const mins = decl.checkMinimums ?? {};
  return fc.record({
    base: ruleCaseSpecArb(decl, { d: [1, 4], seq_len: [1, 4] }), shape: packedShapeArb(chunks),
    extra: seqExtrasArb(PACKED_MAX_SEQUENCES * PACKED_MAX_H - 1, EXTRA_STATES.canonical), dFinalSeed: dFinalSeedArb(),
  }).map(({ base, shape, extra, dFinalSeed }) => {
    // no per-sequence T minimum: the length-1 sequence is the point, and the others carry the values a rule's minimum is for
    const lengths = [...shape.lengths];
    return { base: clampHyper(decl, { ...base, d: Math.max(shape.d, mins.d ?? 1), seq_len: lengths[0]! }), B: 1, H: shape.H, extra, dFinalSeed, lengths };
  });
}

/** The batches of a regime case, in order: REGIMES, with `packed` before `long` for a kernel that takes `cu_seqlens`. */
export function caseRegimes(packed: boolean, decl: { readonly longRegime?: string } = {}): (Regime | "packed")[] {
  const out: (Regime | "packed")[] = regimesOf(decl);
  if (packed) out.splice(out.includes("long") ? out.indexOf("long") : out.length, 0, "packed");
  return out;
}

/**
 * A case of the regime profile: one batch of every regime, in REGIMES order; for a kernel that takes
 * `cu_seqlens` (`packed`, canonical cases), a packed batch before the costly `long` one.
 */
export function regimeArb<F extends CaseForm>(decl: RuleDecl, frozen: boolean, chunks: readonly number[], form: F, packed = false): fc.Arbitrary<CaseOf<F>[]> {
  return fc.tuple(...caseRegimes(packed, decl).map((r) => (r === "packed" ? packedBatchArb(decl, chunks) as fc.Arbitrary<CaseOf<F>> : regimeBatchArb(decl, frozen, r, chunks, form))));
}

/**
 * A declared case (fixed values, drawn once with `seed`): an abi case is the generated case at
 * `sizes` with B, H and C set and dy and d(final state) given; a canonical case the rule's case at
 * `sizes` with three other sequences and d(final state) of the same seed.
 */
function declared<F extends CaseForm>(decl: RuleDecl, frozen: boolean, form: F, seed: number, sizes: SizeLimits, B: number, C: number): CaseOf<F> {
  if (form === "canonical") {
    const [base] = fc.sample(ruleCaseSpecArb(decl, sizes), { seed, numRuns: 1 });
    const [extra] = fc.sample(seqExtrasArb(3, EXTRA_STATES.canonical), { seed, numRuns: 1 });
    return { base: base!, B, H: 2, extra: extra!, dFinalSeed: seed } as CaseOf<F>;
  }
  const [k] = fc.sample(caseArb(decl, frozen, "default", "abi", sizes), { seed, numRuns: 1 });
  return { ...k!, B, H: 2, C, dyNull: false, dFinalNull: false } as CaseOf<F>;
}

/**
 * The declared boundary case every kernel check of the default and deep profiles runs first
 * (docs/spec/conformance.md#regime): T = C + 1 at the kernel's (smallest) chunk size C, d = 4, one
 * batch of two heads, dy and d(final state) given; an abi case at checkpoint interval C. Seed 1.
 */
export function boundaryExample<F extends CaseForm>(decl: RuleDecl, frozen: boolean, C: number, form: F): CaseOf<F> {
  return declared(decl, frozen, form, 1, { d: [4, 4], seq_len: [C + 1, C + 1] }, 1, C);
}

/**
 * The declared guard case every kernel check runs after its other declared cases
 * (docs/spec/hazards.md#odd-key): d = ODD_KEY_D, T = 3 (or the rule's minimum), B = 1, H = 2; an abi
 * case at checkpoint interval C. Seed 3.
 */
export function oddKeyExample<F extends CaseForm>(decl: RuleDecl, frozen: boolean, C: number, form: F): CaseOf<F> {
  const T = Math.max(3, decl.checkMinimums?.seq_len ?? 1);
  return declared(decl, frozen, form, 3, { d: [ODD_KEY_D, ODD_KEY_D], seq_len: [T, T] }, 1, C);
}

/**
 * The declared saturated case (docs/spec/conformance.md#regime, docs/spec/py-backend.md#edges,
 * cases/edge-gates.ts): T = C + SATURATED_TAIL (or the rule's minimum) at the smallest chunk size C,
 * d = 4 (or the rule's minimum: canonical), B = 2, H = 2, each sequence's alpha and theta at a corner;
 * an abi case at checkpoint interval C. Seed 4. Null for a frozen read, and for an abi case of a
 * rule whose pair reads neither gate (a canonical case's kernel says which gates it takes: the
 * caller asks, docs/spec/py-backend.md#edges).
 */
export function saturatedExample<F extends CaseForm>(decl: RuleDecl, frozen: boolean, C: number, form: F): CaseOf<F> | null {
  if (frozen) return null;
  const T = Math.max(C + SATURATED_TAIL, decl.checkMinimums?.seq_len ?? 1);
  if (form === "canonical") {
    const k = declared(decl, false, "canonical", 4, { d: [4, 4], seq_len: [T, T] }, 2, C);
    return { base: clampHyper(decl, { ...k.base, d: Math.max(4, decl.checkMinimums?.d ?? 1) }), B: 2, H: 2, extra: k.extra, dFinalSeed: 4, edge: { kind: "saturated" } } as CaseOf<F>;
  }
  const reads = abiOf(decl.key)?.inputs ?? [];
  if (!SATURATED_GATES.some((g) => reads.includes(g))) return null;
  return { ...declared(decl, false, "abi", 4, { d: [4, 4], seq_len: [T, T] }, 2, C), saturated: true } as CaseOf<F>;
}

/**
 * A check's fixed examples: `first`, then the same case at every other value of each enumerated
 * hyperparameter (cases/rule-case.ts otherEnumValues). A frozen read writes nothing, so its
 * enumerated write variants are not repeated.
 */
export function withEnumExamples<K extends KernelCaseSpec>(decl: RuleDecl, frozen: boolean, first: K): K[] {
  return frozen ? [first] : [first, ...otherEnumValues(decl, first.base).map((base) => ({ ...first, base }))];
}
