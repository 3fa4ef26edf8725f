/**
 * A kernel case's batch (docs/spec/kernel-abi.md#shapes): B·H independent sequences, sequence
 * n = b·H + h, the first the rule registry's generated case and the others its own seed, gate
 * levels and initial state (SeqExtra); the run counts and the declared sizes every kernel check
 * shares. What goes with it lives beside it, one concern a module:
 *
 *   cases/kernel-regimes.ts   the shapes a case is drawn at: regimes, chunk boundaries, packed batches
 *   cases/kernel-layout.ts    the ABI's and the canonical layout's packing and unpacking of sequences
 *   cases/kernel-tensors.ts   a case's tensors by what they are (TensorKey), their report names, the judge's items
 *   cases/kernel-shapes.ts    the shapes a check ran (details.shapes)
 */
import * as fc from "fast-check";
import { Rng } from "../src/rng.ts";
import type { ALPHA_LEVELS, THETA_LEVELS } from "./rule-case.ts";

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
