/**
 * Generated model cases for C2, C3, C4 and C7: sizes, level rules (each rule alone, or levels
 * mixing rules), active/frozen patterns per k, and the fixed cases of the deterministic C7 loops.
 */
import * as fc from "fast-check";
import { chunkSizesFor, MAC_INPUT_SCALE, type ContextKind, type ModelCaseSpec } from "./model-case.ts";
import { ruleCaseSpecArb } from "./rule-case.ts";
import { pulseAt } from "../src/model/conductor.ts";
import { COMPOSITIONS, DEFAULT_FREQ_THRESHOLD, type Composition, type FreqSchedule } from "../src/model/config.ts";
import { MEMORY_RULES, ruleByKey, type MemoryRuleKey } from "../src/rules/index.ts";

/** The CMS sizes every model check covers (D11). */
export const KS = [1, 2, 4] as const;

export interface Sizes {
  readonly d: [number, number];
  readonly seq_len: [number, number];
  readonly vocab: [number, number];
}

/** The bounds: d <= 8, seq_len <= 8, vocab <= 16 (d = 1 makes row-normalised keys constant). */
export const SIZES: Sizes = { d: [2, 8], seq_len: [3, 8], vocab: [3, 16] };
/** Full finite differences need tiny shapes. */
export const TINY: Sizes = { d: [2, 4], seq_len: [2, 4], vocab: [3, 5] };

function hyperArb(rule: MemoryRuleKey): fc.Arbitrary<Record<string, number | string>> {
  return ruleCaseSpecArb(ruleByKey(rule)).map((s) => ({ ...s.hyper }));
}

function divisorsUpTo4(d: number): number[] {
  return [1, 2, 3, 4].filter((h) => d % h === 0);
}

/**
 * Case specs for a list of level rules. The context is each rule's random valid state: a
 * frozen level reading the D4 init of a zero-init rule reads zero, and the MLP rules' hash init
 * is small enough to push their gradients to ~1e-10.
 */
export function specArb(rules: fc.Arbitrary<MemoryRuleKey[]>, sizes: Sizes, freq: FreqSchedule,
  context: ContextKind = "random", pattern: Composition = "mag"): fc.Arbitrary<ModelCaseSpec> {
  return fc.record({
    d: fc.integer({ min: sizes.d[0], max: sizes.d[1] }),
    seq_len: fc.integer({ min: sizes.seq_len[0], max: sizes.seq_len[1] }),
    vocab: fc.integer({ min: sizes.vocab[0], max: sizes.vocab[1] }),
    headPick: fc.nat({ max: 3 }),
    window: fc.integer({ min: 2, max: 9 }),
    pad: fc.boolean(),
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
    levels: rules.chain((rs) => fc.tuple(...rs.map((r) => hyperArb(r).map((hyper) => ({ rule: r, hyper }))))),
  }).map(({ headPick, ...drawn }) => {
    // no smaller than a level's rule makes every gradient informative (its checkMinimums.d)
    const s = { ...drawn, d: Math.max(drawn.d, ...drawn.levels.map((l) => ruleByKey(l.rule).checkMinimums?.d ?? 1)) };
    const hs = divisorsUpTo4(s.d);
    const spec = { ...s, heads: hs[headPick % hs.length]!, freq, context };
    // A MAG spec carries no pattern field, so MAG's generated cases are exactly what they were.
    // MAC's are drawn wider, so their gradients are informative (docs/spec/tolerances.md#mac-inputs).
    return pattern === "mag" ? spec : pattern === "mac" ? { ...spec, pattern, scales: MAC_INPUT_SCALE } : { ...spec, pattern };
  });
}

/** n independent draws of an arbitrary from one seed, without fast-check's bias towards small values. */
export function independentDraws<T>(arb: fc.Arbitrary<T>, n: number, seed: number): T[] {
  return fc.sample(arb, { seed, numRuns: n, unbiased: true });
}

/** Every composition the model checks iterate (docs/spec/composition.md). */
export { COMPOSITIONS, type Composition };

/**
 * The id segment of a composition: empty for MAG, so the ids of MAG's checks are the ones
 * reports were compared by before MAC and MAL existed; "mac/" and "mal/" otherwise.
 */
export function compositionId(pattern: Composition): string {
  return pattern === "mag" ? "" : `${pattern}/`;
}

/** The subject's pattern field: absent for MAG (unchanged reports), the pattern otherwise. */
export function compositionSubject(pattern: Composition): { pattern?: string } {
  return pattern === "mag" ? {} : { pattern };
}

export const sameRule = (rule: MemoryRuleKey, k: number) => fc.constant(Array.from({ length: k }, () => rule));
export const mixedRules = (k: number) => fc.array(fc.constantFrom(...MEMORY_RULES), { minLength: k, maxLength: k });

/**
 * The model's level pattern, as check ids and report subjects name it: every level active, level l
 * frozen, the Conductor's pulse at step n (k = 4), the learned frequency gate deciding, or the
 * Conductor's schedule over a whole loop (C7).
 */
export type LevelPattern = "all-active" | `frozen-${number}` | `step-${number}` | "learned" | "scheduled";

export interface Pattern {
  readonly name: LevelPattern;
  readonly active: readonly boolean[];
}

/** All active; each non-zero level frozen; for k = 4 the Conductor's pulses at steps 1, 8 and 64 (step 0 = all active). */
export function patterns(k: number): Pattern[] {
  const out: Pattern[] = [{ name: "all-active", active: Array.from({ length: k }, () => true) }];
  for (let l = 1; l < k; l++) out.push({ name: `frozen-${l}`, active: Array.from({ length: k }, (_, i) => i !== l) });
  if (k === 4) for (const n of [1, 8, 64]) out.push({ name: `step-${n}`, active: pulseAt(n, chunkSizesFor(4)).active });
  return out;
}

/** The pattern an active mask is (for fixtures, which store the mask), or undefined when none is. */
export function levelPatternOf(active: readonly boolean[]): LevelPattern | undefined {
  return patterns(active.length).find((p) => p.active.length === active.length && p.active.every((a, i) => a === active[i]))?.name;
}

export type ModelSubject = { rule: string; k: number; levels: LevelPattern };

/** Every (subject, k, pattern) the model checks cover: each rule alone, and levels mixing rules. */
export interface Target {
  readonly key: string;
  readonly subject: (k: number, p: Pattern) => ModelSubject;
  readonly rules: (k: number) => fc.Arbitrary<MemoryRuleKey[]>;
}

export function targets(): Target[] {
  const out: Target[] = MEMORY_RULES.map((rule) => ({
    key: rule as string,
    subject: (k: number, p: Pattern) => ({ rule, k, levels: p.name }),
    rules: (k: number) => sameRule(rule, k),
  }));
  out.push({ key: "mixed", subject: (k, p) => ({ rule: "mixed", k, levels: p.name }), rules: mixedRules });
  return out;
}

export const FIXED: FreqSchedule = { kind: "fixed" };
export const LEARNED: FreqSchedule = { kind: "learned", threshold: DEFAULT_FREQ_THRESHOLD };

/** One fixed, representative case (C7 loops are deterministic single runs). */
export function fixedSpec(rules: readonly MemoryRuleKey[], seed: number, over: Partial<ModelCaseSpec> = {}): ModelCaseSpec {
  const spec: ModelCaseSpec = {
    d: 6, seq_len: 6, vocab: 11, heads: 2, window: 4, pad: true, seed, freq: FIXED, context: "init",
    levels: rules.map((rule) => ({ rule, hyper: {} })), ...over,
  };
  return spec.pattern === "mag" ? withoutPattern(spec) : spec;
}

function withoutPattern(spec: ModelCaseSpec): ModelCaseSpec {
  const { pattern: _p, ...rest } = spec;
  return rest;
}

/** The levels of the mixed C7 loops, by name (adding a rule to the registry changes nothing here). */
const MIXED_LEVELS: Readonly<Record<number, readonly MemoryRuleKey[]>> = {
  2: ["hebbian", "lattice"],
  4: ["yaad", "atlas", "moneta", "trellis"],
};

/** The C7 loops' level rules: one rule everywhere, or the fixed mix for "mixed". */
export function levelRules(key: string, k: number): MemoryRuleKey[] {
  if (key !== "mixed") return Array.from({ length: k }, () => key as MemoryRuleKey);
  const mix = MIXED_LEVELS[k];
  if (mix === undefined) throw new Error(`no mixed levels declared for k = ${k}`);
  return [...mix];
}
