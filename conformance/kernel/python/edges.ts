/**
 * The edge cases of the py: kernel checks (docs/spec/py-backend.md#edges): declared cases at the
 * values where production kernels have broken, on top of the generated ones.
 *
 * - Saturated gates at a partial last chunk: T = C + 3 at the kernel's smallest chunk size, B = 2,
 *   H = 2, each of the four sequences at one corner of (α, θ): α → 1 (a kernel in log space gets
 *   g in [−80, −30], one that takes α gets 1) or α → 0 (no decay: α = 0, g = 0), and θ → 0 or θ → 1
 *   (SATURATED_THETA). The chunked kernel that factors exp(b_C − b_i) as exp(b_C) · exp(−b_i) gets
 *   0 · inf = NaN there (a bug class of flash-linear-attention's history).
 * - The other query scale: a kernel that takes its scale by keyword is called once at the value it
 *   is not usually called with: 1 where the declared value is d^-1/2 (or another number), d^-1/2
 *   where it is 1.
 *
 * - Empty and length-1 sequences in a packed batch (a kernel that declares `varlen`): lengths
 *   [0, C + 1, 0, 1, 0] at the smallest chunk size C, so cu_seqlens holds equal offsets at its
 *   start, in its middle and at its end. An empty sequence's final state is its initial state and
 *   d(initial state) is d(final state); every state is random (a zero one would hide a kernel that
 *   writes zeros, or a neighbour's state, as an empty sequence's final state).
 *
 * The values are set in the kernel's own parametrisation and mapped to the reference's exactly
 * (conventions.ts referenceValue), so the reference sees what the kernel was given.
 */
import * as fc from "fast-check";
import { clampHyper, ruleCaseSpecArb } from "../../../cases/rule-case.ts";
import { saturatedExample, seqExtrasArb, type CanonicalCaseSpec, type KernelEdge } from "../../../cases/kernel-batch.ts";
import { SATURATED_GATES, SATURATED_LABEL, SATURATED_LOG_GATE, SATURATED_THETA, saturatedCorner, saturatedThetaTop } from "../../../cases/edge-gates.ts";
import { roundedCopy, type StorageDType } from "../../../src/precision.ts";
import { Rng } from "../../../src/rng.ts";
import { Tensor } from "../../../src/tensor.ts";
import type { RuleDecl, RuleConfig } from "../../../src/rules/types.ts";
import { referenceValue, type Conventions } from "./conventions.ts";

/**
 * The gates a saturated case can set for a kernel: α and θ among its inputs, less those it computes
 * itself from a raw input (gate_forms: the raw value that saturates them is the form's, not ours) and
 * those it takes once per head (per_head: one value per head, not one per sequence).
 */
export function saturableGates(conv: Conventions, inputs: readonly string[]): string[] {
  return SATURATED_GATES.filter((g) => inputs.includes(g) && conv.gate_forms?.[g] === undefined && conv.per_head?.includes(g) !== true);
}

/** The sequence of a case an edge rewrites: its kernel inputs and the reference's, by name. */
export interface EdgeSeq {
  h: number;
  in64: Record<string, Tensor>;
  kin64: Record<string, Tensor>;
}

/**
 * Sets α and θ of every sequence at its corner (in place), in the kernel's parametrisation rounded to
 * the input's dtype, and the reference's values from them. `seed`: the draw of the log gates.
 */
export function saturateGates(seqs: readonly EdgeSeq[], decl: RuleDecl, cfg: RuleConfig, conv: Conventions, inputs: readonly string[],
  storage: StorageDType, seed: number): void {
  const rng = new Rng(seed ^ 0x5a7e);
  const thetaTop = saturatedThetaTop(decl, cfg);
  seqs.forEach((s, n) => {
    const { alphaHigh, thetaHigh } = saturatedCorner(n);
    for (const g of saturableGates(conv, inputs)) {
      const kin = s.kin64[g];
      if (kin === undefined) continue;
      const log = g in conv.log_gates;
      const v = new Float64Array(kin.size);
      for (let i = 0; i < v.length; i++) {
        v[i] = g === "alpha"
          ? (alphaHigh ? (log ? rng.uniform(SATURATED_LOG_GATE[0], SATURATED_LOG_GATE[1]) : 1) : 0)
          : (thetaHigh ? thetaTop : SATURATED_THETA.low);
      }
      const t = new Tensor("f64", [...kin.shape]);
      t.data.set(roundedCopy(conv.input_dtypes?.[g] ?? storage, v));
      s.kin64[g] = t;
      s.in64[g] = referenceValue(conv, g, t, cfg.d, s.h);
    }
  });
}

/** Whether a kernel takes its query scale by keyword (so the harness chooses the value it is called with). */
export const takesScale = (conv: Conventions): boolean => conv.scale !== null && conv.scale.keyword !== null && conv.scale.divided === undefined;

/** The scale edge of a kernel that takes one: 1 where it is usually called with another value, else d^-1/2; null when it takes none. */
export function otherScale(conv: Conventions): KernelEdge | null {
  if (!takesScale(conv)) return null;
  return { kind: "scale", scale: conv.scale!.value === 1 ? "rsqrt_dk" : 1 };
}

/** A case's conventions under its edge: the scale edge's value as the declared one (the reference then reads q at that scale). */
export function edgeConventions(conv: Conventions, edge: KernelEdge | undefined): Conventions {
  if (edge?.kind !== "scale" || conv.scale === null) return conv;
  return { ...conv, scale: { ...conv.scale, value: edge.scale } };
}

/** The scale value the kernel is called with under a scale edge (the request header's `scale`), else undefined (the host's own). */
export function edgeScaleValue(edge: KernelEdge | undefined, d: number): number | undefined {
  if (edge?.kind !== "scale") return undefined;
  return edge.scale === "rsqrt_dk" ? 1 / Math.sqrt(d) : edge.scale;
}

/** How a message names an edge case. */
export function edgeLabel(edge: KernelEdge): string {
  if (edge.kind === "empty") return EMPTY_LABEL;
  return edge.kind === "saturated"
    ? SATURATED_LABEL
    : `query scale ${edge.scale === "rsqrt_dk" ? "d^-1/2" : edge.scale}`;
}

/** The declared scale case (a kernel that takes its scale by keyword): the boundary case's shape, T = C + 1, d = 4, B = 1, H = 2, at the other scale. */
export function pyScaleExample(decl: RuleDecl, C: number, edge: KernelEdge): CanonicalCaseSpec {
  const mins = decl.checkMinimums ?? {};
  const T = Math.max(C + 1, mins.seq_len ?? 1);
  const [base] = fc.sample(ruleCaseSpecArb(decl, { d: [4, 4], seq_len: [T, T] }), { seed: 5, numRuns: 1 });
  const [extra] = fc.sample(seqExtrasArb(3, ["random", "init"]), { seed: 5, numRuns: 1 });
  return { base: clampHyper(decl, { ...base!, d: Math.max(4, mins.d ?? 1) }), B: 1, H: 2, extra: extra!, dFinalSeed: 5, edge };
}

/** The edge cases a check runs (docs/spec/py-backend.md#edges): saturated gates for an active pair whose kernel takes α or θ, the other scale for a kernel that takes one. */
export function pyEdgeExamples(decl: RuleDecl, C: number, conv: Conventions, frozen: boolean, inputs: readonly string[]): CanonicalCaseSpec[] {
  const out: CanonicalCaseSpec[] = [];
  const saturated = saturatedExample(decl, frozen, C, "canonical");
  if (saturated !== null && saturableGates(conv, inputs.filter((n) => !conv.absent.includes(n))).length > 0) out.push(saturated);
  const scale = otherScale(conv);
  if (scale !== null) out.push(pyScaleExample(decl, C, scale));
  return out;
}

/** How a message names the empty-sequence case. */
export const EMPTY_LABEL = "empty sequences and a length-1 sequence";

/** The packed lengths of the declared empty-sequence case at the smallest chunk size C: equal offsets at cu_seqlens' start, middle and end. */
export const emptyLengths = (C: number): number[] => [0, C + 1, 0, 1, 0];

/**
 * The declared empty-sequence case (a kernel that declares `varlen`): lengths emptyLengths(C), d = 4,
 * H = 2, every sequence's initial state random. base.seq_len is the first non-empty length (the
 * rule case its inputs are read from); each sequence runs at its own length.
 */
export function pyEmptyExample(decl: RuleDecl, C: number): CanonicalCaseSpec {
  const mins = decl.checkMinimums ?? {};
  const lengths = emptyLengths(C);
  const first = lengths.find((L) => L > 0)!;
  const [base] = fc.sample(ruleCaseSpecArb(decl, { d: [4, 4], seq_len: [first, first] }), { seed: 6, numRuns: 1 });
  const [extra] = fc.sample(seqExtrasArb(lengths.length * 2 - 1, ["random"]), { seed: 6, numRuns: 1 });
  return { base: clampHyper(decl, { ...base!, d: Math.max(4, mins.d ?? 1), state: "random" }), B: 1, H: 2, extra: extra!, dFinalSeed: 6, lengths, edge: { kind: "empty" } };
}
