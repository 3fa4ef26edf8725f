/**
 * A kernel case's batch (docs/spec/kernel-abi.md#shapes): B·H independent sequences, sequence
 * n = b·H + h, laid out as the ABI lays them out — per-token tensors [B, T, H, d], gates
 * [B, T, H], states [B, H, ...] (contiguous per sequence) — and what a kernel, ref64 or the plain
 * reference gives for one sequence, as a typed record ({y, state, grads, dState0}: SeqTensors of
 * oracle/plain-reference.ts, the lowest layer that produces one) instead of
 * tensor names in strings. C5's native and py: checks and C6's kernel replay all pack, unpack and
 * name their tensors here.
 */
import * as fc from "fast-check";
import { abiOf, gradInput, isTokenGate, rowsPerToken, type GradName, type RuleAbi } from "../ffi/abi.ts";
import { Tensor } from "../src/tensor.ts";
import { Rng } from "../src/rng.ts";
import { usedParams } from "../src/rules/level.ts";
import { stateNames } from "../src/rules/state-grad.ts";
import type { InnerGrads, RuleDecl } from "../src/rules/types.ts";
import type { Compared } from "../oracle/kernel-judge.ts";
import type { CaseVerdict } from "../oracle/compare.ts";
import type { ALPHA_LEVELS, THETA_LEVELS } from "./rule-case.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";

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
 * The regimes of a case run in order up to the first that fails: the verdict is that regime's, and
 * shrinking a failure pays for the regimes before it only (`long`, the costliest, comes last).
 */
export function untilFailure<K>(ks: readonly K[], run: (k: K) => CaseVerdict): CaseVerdict[] {
  const outs: CaseVerdict[] = [];
  for (const k of ks) {
    const o = run(k);
    outs.push(o);
    if (!o.ok && o.vacuous !== true) break;
  }
  return outs;
}

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

/** The offsets of packed sequences of these lengths: [0, L1, L1 + L2, ..., ΣL]. */
export function cuSeqlens(lengths: readonly number[]): number[] {
  const cu = [0];
  for (const L of lengths) cu.push(cu[cu.length - 1]! + L);
  return cu;
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

/** Per-sequence [L_i, w] arrays (sequence n = i·H + h) as one packed tensor [1, ΣL, H, w] (written into `out`). */
export function packPackedTokens<A extends NumArray>(parts: readonly ArrayLike<number>[], lengths: readonly number[], H: number, w: number, out: A): A {
  const cu = cuSeqlens(lengths);
  lengths.forEach((L, i) => {
    for (let h = 0; h < H; h++) {
      const p = parts[i * H + h]!;
      for (let t = 0; t < L; t++) for (let j = 0; j < w; j++) out[((cu[i]! + t) * H + h) * w + j] = p[t * w + j]!;
    }
  });
  return out;
}

/** Sequence n's [L_i, w] values of a packed tensor [1, ΣL, H, w] (written into `out`, L_i·w long). */
export function unpackPackedTokens<A extends NumArray>(a: ArrayLike<number>, lengths: readonly number[], H: number, w: number, n: number, out: A): A {
  const i = Math.floor(n / H), h = n % H, start = cuSeqlens(lengths)[i]!;
  for (let t = 0; t < lengths[i]!; t++) for (let j = 0; j < w; j++) out[t * w + j] = a[((start + t) * H + h) * w + j]!;
  return out;
}

/** The most sequences a regime batch holds (MANY_HEADS with B = ⌈32/H⌉). */
export const REGIME_MAX_SEQS = Math.max(...MANY_HEADS.map((H) => Math.ceil(HEADS_MIN_SEQS / H) * H));

/**
 * The shapes a kernel check ran (docs/spec/conformance.md#shapes): per dimension [min, max] over
 * its cases, and how many chunk boundaries its sequences crossed (a sequence of T tokens in chunks
 * of C crosses ⌊(T − 1)/C⌋; summed over every sequence of every case).
 */
export interface ShapesRan {
  T: [number, number];
  d: [number, number];
  H: [number, number];
  B: [number, number];
  chunk_boundaries_crossed: number;
  /**
   * Packed variable-length batches among the cases (docs/spec/py-backend.md#packed): how many, the
   * range of their sequence counts and every sequence length they packed (sorted); absent when none.
   */
  packed?: { batches: number; sequences: [number, number]; lengths: number[] };
}

/** Collects the shapes of a check's cases (reported as `details.shapes`). */
export class ShapeTally {
  private ran: ShapesRan | null = null;
  /** One batch of B·H sequences of T tokens, run in chunks of C. */
  add(s: { B: number; T: number; H: number; d: number }, C: number): void {
    this.record(s, s.B * s.H * crossings(s.T, C));
  }
  /**
   * One packed batch (B = 1, T = ΣL): its sequences count their own chunk boundaries, ⌊(L_i − 1)/C⌋
   * per sequence and head.
   */
  addPacked(s: { lengths: readonly number[]; H: number; d: number }, C: number): void {
    const T = s.lengths.reduce((a, b) => a + b, 0), N = s.lengths.length;
    this.record({ B: 1, T, H: s.H, d: s.d }, s.H * s.lengths.reduce((a, L) => a + crossings(L, C), 0));
    const old = this.ran!.packed;
    this.ran!.packed = {
      batches: (old?.batches ?? 0) + 1, sequences: span(old?.sequences, N),
      lengths: [...new Set([...(old?.lengths ?? []), ...s.lengths])].sort((a, b) => a - b),
    };
  }
  get shapes(): ShapesRan | null {
    return this.ran;
  }
  private record(s: { B: number; T: number; H: number; d: number }, crossed: number): void {
    const r = this.ran;
    this.ran = {
      ...r,
      T: span(r?.T, s.T), d: span(r?.d, s.d), H: span(r?.H, s.H), B: span(r?.B, s.B),
      chunk_boundaries_crossed: (r?.chunk_boundaries_crossed ?? 0) + crossed,
    };
  }
}

/** A [min, max] range widened to v. */
const span = (r: [number, number] | undefined, v: number): [number, number] => (r === undefined ? [v, v] : [Math.min(r[0], v), Math.max(r[1], v)]);
/** The chunk boundaries a sequence of T tokens crosses in chunks of C (an empty one none). */
const crossings = (T: number, C: number): number => (T < 1 ? 0 : Math.floor((T - 1) / Math.max(1, C)));

/** A finished check's result with the shapes its cases ran in `details.shapes`. */
export function withShapes<R extends { details?: Readonly<Record<string, unknown>> }>(r: R, tally: ShapeTally): R {
  const shapes = tally.shapes;
  return shapes === null ? r : { ...r, details: { ...(r.details ?? {}), shapes } };
}

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

/** The sizes of a batch: B batches × H heads of T tokens. */
export interface BatchDims {
  readonly B: number;
  readonly T: number;
  readonly H: number;
}

/** A writable array of numbers (what the packers fill). */
export interface NumArray {
  readonly length: number;
  [i: number]: number;
}

/**
 * Whether rule a's per-token tensor is a gate (alpha, theta, eta) or a gate's gradient (dalpha, ...)
 * with one value per token (a channel gate has d: ffi/abi.ts isTokenGate).
 */
export const isGateTensor = (a: Pick<RuleAbi, "channelGates">, name: string): boolean => isTokenGate(a, name);

/**
 * Values per token of rule a's per-token tensor: 1 for a token gate or its gradient, else d; times
 * the rows per token of an input in the ABI row's tokenRows (n_h for Gated DeltaProduct's k, v,
 * theta), read from the call's `hyper` (docs/spec/kernel-abi.md#token-rows).
 */
export function tokenWidth(a: Pick<RuleAbi, "channelGates"> & Partial<Pick<RuleAbi, "tokenRows" | "rule">>, name: string, d: number,
  hyper?: Readonly<Record<string, number | string>>): number {
  const rows = a.tokenRows === undefined ? 1 : rowsPerToken({ rule: a.rule ?? "?", tokenRows: a.tokenRows }, name, hyper);
  return rows * (isGateTensor(a, name) ? 1 : d);
}

/** Per-sequence [T, w] arrays as one ABI tensor [B, T, H, w] (written into `out`). */
export function packTokens<A extends NumArray>(parts: readonly ArrayLike<number>[], s: BatchDims, w: number, out: A): A {
  const { B, T, H } = s;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      const p = parts[b * H + h]!;
      for (let t = 0; t < T; t++) for (let i = 0; i < w; i++) out[((b * T + t) * H + h) * w + i] = p[t * w + i]!;
    }
  return out;
}

/** Sequence n's [T, w] values of an ABI tensor [B, T, H, w] (written into `out`, T·w long). */
export function unpackTokens<A extends NumArray>(a: ArrayLike<number>, s: BatchDims, w: number, n: number, out: A): A {
  const { T, H } = s;
  const b = Math.floor(n / H), h = n % H;
  for (let t = 0; t < T; t++) for (let i = 0; i < w; i++) out[t * w + i] = a[((b * T + t) * H + h) * w + i]!;
  return out;
}

/** Per-sequence blocks as one tensor whose leading dimensions enumerate the sequences ([B, H, ...] or [N, ...]). */
export function packStates<A extends NumArray>(parts: readonly ArrayLike<number>[], out: A): A {
  let at = 0;
  for (const p of parts) for (let i = 0; i < p.length; i++) out[at++] = p[i]!;
  return out;
}

/** Sequence n's block (a copy) of a tensor whose leading dimensions enumerate `count` sequences. */
export function unpackState<A extends Float32Array | Float64Array>(a: A, count: number, n: number): A {
  const per = a.length / count;
  return a.slice(n * per, (n + 1) * per) as A;
}

/** One tensor of a kernel case, by what it is. */
export type TensorKey =
  | { readonly part: "y" }
  /** The final state (active pairs). */
  | { readonly part: "state"; readonly name: string }
  /** The gradient of the per-token input `name` (k, v, q, alpha, ...). */
  | { readonly part: "grad"; readonly name: string }
  /** The gradient of the initial state (a frozen read: of the state it reads). */
  | { readonly part: "dState0"; readonly name: string };

export function emptySeq<A>(): SeqTensors<A> {
  return { state: {}, grads: {}, dState0: {} };
}

/**
 * How the report names a tensor. "abi" (C5 native, C6 kernel fixtures): y, `state M`, dk, dM_0
 * (a frozen read: dM); "py" (the py: checks): the same with the state's gradient as `dM (initial state)`.
 */
export type NameStyle = "abi" | "py";

/** How one naming spells each kind of tensor. */
export interface TensorNaming {
  readonly y: string;
  state(name: string): string;
  grad(input: string): string;
  dState0(name: string): string;
}

/** A tensor's name under a naming. */
export function nameOf(k: TensorKey, naming: TensorNaming): string {
  return k.part === "y" ? naming.y : naming[k.part](k.name);
}

/** The report's naming: y, `state M`, dk and the state's gradient by style (frozen read: dM). */
function reportNaming(frozen: boolean, style: NameStyle): TensorNaming {
  return {
    y: "y",
    state: (n) => `state ${n}`,
    grad: (n) => `d${n}`,
    dState0: (n) => (style === "py" ? `d${n} (initial state)` : frozen ? `d${n}` : `d${n}_0`),
  };
}

/** What a py: kernel calls its tensors (conformance/py/conventions.ts Conventions). */
export interface KernelNames {
  /** Our input -> the kernel's keyword, where they differ. */
  readonly keywords: Readonly<Record<string, string>>;
  /** The kernel's initial-state keyword, and whether its states travel as a dict (else a single state is a bare tensor). */
  readonly initialState: string;
  readonly stateDict: boolean;
  /** The rule's state names. */
  readonly states: readonly string[];
}

/**
 * A failure message's name of a tensor of a py: kernel: the kernel's own name first, the report's
 * in brackets where they differ (`dg [dalpha]`, `dbeta [dtheta]`, `dinitial_state [dM (initial state)]`,
 * `final state [state M]`).
 */
export function kernelLabel(k: TensorKey, ours: string, names: KernelNames): string {
  const stateKw = (n: string) => (names.stateDict || names.states.length > 1 ? `${names.initialState}.${n}` : names.initialState);
  const theirs = k.part === "y" ? "y"
    : k.part === "state" ? `final state${names.stateDict || names.states.length > 1 ? ` ${k.name}` : ""}`
    : k.part === "grad" ? `d${names.keywords[k.name] ?? k.name}`
    : `d${stateKw(k.name)}`;
  return theirs === ours ? ours : `${theirs} [${ours}]`;
}

/** The report's name of a tensor: built here and nowhere else. */
export function tensorName(k: TensorKey, frozen: boolean, style: NameStyle = "abi"): string {
  return nameOf(k, reportNaming(frozen, style));
}

/** The reference's gradients (InnerGrads: dk, dalpha, ..., dState0) as the record's grads and dState0; absent ones stay absent. */
export function fromInnerGrads(g: InnerGrads): Pick<SeqTensors, "grads" | "dState0"> {
  const { dState0, ...byGrad } = g;
  const grads: Record<string, ArrayLike<number>> = {}, d0: Record<string, ArrayLike<number>> = {};
  for (const [n, t] of Object.entries(byGrad)) if (t instanceof Tensor) grads[gradInput(n as GradName)] = t.data;
  for (const [n, t] of Object.entries(dState0 ?? {})) d0[n] = t.data;
  return { grads, dState0: d0 };
}

/** The gradients a kernel returns (frozen read: dq and the read state's), in the ABI's order. */
export function kernelGradKeys(abi: RuleAbi, frozen: boolean): { tokens: Extract<TensorKey, { part: "grad" }>[]; states: Extract<TensorKey, { part: "dState0" }>[] } {
  return {
    tokens: frozen ? [{ part: "grad", name: "q" }] : abi.grads.map((g) => ({ part: "grad", name: gradInput(g) })),
    states: abi.state.map((name) => ({ part: "dState0", name })),
  };
}

/** The report's name of the gradient of a rule's input or parameter in the tape (tape-e2e): `grad X`, `grad W_K`. */
export const paramGradName = (n: string): string => `grad ${n}`;

/** The tensors a kernel check of this kind compares, named as the report names them (what `coverage` expects to see exercised). */
export function expectedTensors(kind: "forward" | "backward" | "tape-e2e", decl: RuleDecl, frozen: boolean, style: NameStyle = "abi"): string[] {
  const states = stateNames(decl);
  const name = (k: TensorKey) => tensorName(k, frozen, style);
  switch (kind) {
    case "forward":
      return frozen ? ["y"] : ["y", ...states.map((n) => name({ part: "state", name: n }))];
    case "backward":
      // a frozen read's S (Titans, Atlas) has a zero gradient by the math: only M is expected to be exercised
      return frozen
        ? [name({ part: "grad", name: "q" }), name({ part: "dState0", name: states[0]! })]
        : [...(abiOf(decl.key)?.grads ?? []).map((g) => name({ part: "grad", name: gradInput(g) })), ...states.map((n) => name({ part: "dState0", name: n }))];
    case "tape-e2e":
      return ["y", paramGradName("X"), ...usedParams(decl).map(paramGradName)];
  }
}

/** Whether a tensor is stored in the state dtype (states and their gradients) rather than the storage dtype. */
export const isStateTensor = (k: TensorKey): boolean => k.part === "state" || k.part === "dState0";
/** The judge's groups: outputs (y, final state) and gradients. */
export const groupOf = (k: TensorKey): "out" | "grad" => (k.part === "grad" || k.part === "dState0" ? "grad" : "out");

/** Every tensor of a record with its key, in the order y, final states, input gradients, state gradients. */
export function entries<A>(r: SeqTensors<A>): [TensorKey, A][] {
  const out: [TensorKey, A][] = [];
  if (r.y !== undefined) out.push([{ part: "y" }, r.y]);
  for (const [name, a] of Object.entries(r.state)) out.push([{ part: "state", name }, a]);
  for (const [name, a] of Object.entries(r.grads)) out.push([{ part: "grad", name }, a]);
  for (const [name, a] of Object.entries(r.dState0)) out.push([{ part: "dState0", name }, a]);
  return out;
}

/** The tensor of a record under a key, or undefined. */
export function tensorAt<A>(r: SeqTensors<A>, k: TensorKey): A | undefined {
  return k.part === "y" ? r.y : k.part === "state" ? r.state[k.name] : k.part === "grad" ? r.grads[k.name] : r.dState0[k.name];
}

/** A record with `f` applied to every tensor (keys kept). */
export function mapSeq<A, B>(r: SeqTensors<A>, f: (a: A, k: TensorKey) => B): SeqTensors<B> {
  const out = emptySeq<B>();
  for (const [k, a] of entries(r)) setAt(out, k, f(a, k));
  return out;
}

/** Puts a tensor into a record under its key. */
export function setAt<A>(r: SeqTensors<A>, k: TensorKey, a: A): void {
  if (k.part === "y") r.y = a;
  else if (k.part === "state") r.state[k.name] = a;
  else if (k.part === "grad") r.grads[k.name] = a;
  else r.dState0[k.name] = a;
}

/**
 * The judge's items of a case (oracle/kernel-judge.ts), per sequence and tensor, named as the report
 * names them: every tensor the kernel gave, and with `all`, every tensor ref64 has that the kernel
 * did not give (a missing output fails). A tensor a reference lacks is zero.
 */
export function comparedItems(kernel: readonly SeqTensors[], ref64: readonly SeqTensors[], ref32: readonly SeqTensors[],
  frozen: boolean, style: NameStyle, all: boolean, labels?: (k: TensorKey, name: string) => string): Compared[] {
  const items: Compared[] = [];
  kernel.forEach((kern, n) => {
    const keys = entries(kern).map(([k]) => k);
    if (all) for (const [k] of entries(ref64[n]!)) if (tensorAt(kern, k) === undefined) keys.push(k);
    for (const k of keys) {
      const got = tensorAt(kern, k), r64 = tensorAt(ref64[n]!, k), r32 = tensorAt(ref32[n]!, k);
      const len = (r64 ?? got)?.length ?? 0;
      const name = tensorName(k, frozen, style), label = labels?.(k, name);
      items.push({
        name, group: groupOf(k), part: isStateTensor(k) ? "state" : "token", seq: n, kernel: got,
        ref64: r64 ?? new Float64Array(len), ref32: r32 ?? new Float64Array(len), ...(label !== undefined && label !== name ? { label } : {}),
      });
    }
  });
  return items;
}
