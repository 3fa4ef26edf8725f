/**
 * C5 forward and backward cases: the kernel's outputs on a batch of B·H sequences against the
 * TypeScript reference in f64 (ref64) and in f32 (ref32, the bound's yardstick), per tensor and
 * sequence — y and the final state; every input gradient and d(initial state), with dy and
 * d(final state) given or NULL (docs/spec/kernel-abi.md#backward).
 */
import type { Shape } from "../../ffi/abi.ts";
import type { ChunkForm, KernelLib } from "../../ffi/lib.ts";
import { hazardVerdict } from "../../ffi/hazards.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleConfig, RuleDecl } from "../../src/rules/types.ts";
import { asStored, sequencesOf, type Seq } from "./batch.ts";
import type { AbiCaseSpec } from "../../cases/kernel-batch.ts";
import { comparedItems } from "../../cases/kernel-tensors.ts";
import { nativeBackend, type NativeBatch } from "./native-backend.ts";
import type { KernelBackend } from "../../cases/kernel-backend.ts";
import type { Precision } from "../../src/precision.ts";
import { plainRuns, plainYardstickSeq } from "../../oracle/plain-reference.ts";
import type { PairCase, SeqTensors } from "../../oracle/kernel-case.ts";
import { referenceRun } from "../../oracle/kernel-reference.ts";
import { flashCompare } from "../../oracle/kernel-judge.ts";
import { chunkFormSymbol } from "../../ffi/abi.ts";
import { hasChunkStartGd } from "../../src/rules/chunk-gd.ts";
import type { KernelTiming } from "./variants.ts";

/**
 * The reference a pair is compared with (docs/spec/kernel-abi.md#chunk-form): the sequential rule,
 * or chunk-start GD at the chunk size the pair declares. An exact chunked pair computes the
 * sequential rule's function and is compared with it.
 */
type RefForm = { gdC: number | null };
const SEQUENTIAL: RefForm = { gdC: null };

/**
 * The form a case compares against, or why the declaration cannot be judged. Frozen reads have no
 * chunk form.
 */
function refFormOf(decl: RuleDecl, frozen: boolean, f: ChunkForm | string): RefForm | string {
  if (frozen) return SEQUENTIAL;
  if (typeof f === "string") return f;
  if (f.kind !== "chunk-start-gd") return SEQUENTIAL;
  if (!hasChunkStartGd(decl)) return `${chunkFormSymbol(decl.key)} declares chunk-start GD, which the reference does not define for '${decl.key}'`;
  return { gdC: f.C };
}

/** The reference (oracle/kernel-reference.ts) on one sequence in one precision: the phase's tensors (absent = zero, filled in by the comparison). */
function reference(decl: RuleDecl, frozen: boolean, s: Seq, p: 32 | 64, cfg: RuleConfig, k: AbiCaseSpec, form: RefForm, which: "forward" | "backward"): SeqTensors {
  const c: PairCase = p === 64
    ? { inputs: s.in64, state: s.st64, dy: s.dy64, dFinal: s.dFinal64 }
    : { inputs: s.in32, state: s.st32, dy: s.dy32, dFinal: s.dFinal32 };
  return referenceRun(decl, frozen, c, cfg, which, { gdC: form.gdC, dyNull: k.dyNull, dFinalNull: k.dFinalNull });
}

/**
 * Kernel outputs against ref64 and the plain reference (the reference in f32, summed in the
 * kernel's declared accumulate dtype), per sequence; a tensor the reference lacks is zero.
 */
function compareAll(decl: RuleDecl, frozen: boolean, k: AbiCaseSpec, seqs: Seq[], cfg: RuleConfig, kernel: readonly SeqTensors[], which: "forward" | "backward",
  exercised: Set<string>, who: string, precision: Precision, form: RefForm, shape: Shape): CaseOutcome {
  const ref = (s: Seq, p: 32 | 64) => reference(decl, frozen, s, p, cfg, k, form, which);
  const r64 = seqs.map((s) => ref(s, 64));
  const r32 = seqs.map((s, n) => plainYardstickSeq(precision.accumulate, r64[n]!, () => asStored(ref(s, 32), precision), plainRuns(decl)));
  return flashCompare(comparedItems(kernel, r64, r32, frozen, "abi", true), exercised, who, precision, { layout: { B: shape.B, H: shape.H, T: shape.T, C: k.C }, prefilled: true });
}

/**
 * One phase of a case on a backend that answers at once (a native library, an in-process kernel;
 * cases/kernel-backend.ts): the forward kernel's y (and, unfrozen, every final state tensor), or every
 * gradient of the backward kernel, d(initial state) included (frozen: dq and d(state)), judged at
 * the precision the phase's function declares.
 */
export function phaseCase(which: "forward" | "backward", decl: RuleDecl, frozen: boolean, backend: KernelBackend<NativeBatch, true>, k: AbiCaseSpec, exercised: Set<string>, timing?: KernelTiming): CaseOutcome {
  const declared = backend.declare(decl.key, frozen);
  const form = refFormOf(decl, frozen, declared.chunkForm);
  if (typeof form === "string") return { ok: false, message: form };
  const precision = declared.precision[which];
  const { seqs, cfg, shape } = sequencesOf(decl, k, frozen, precision);
  const t0 = performance.now();
  const run = backend[which]({ decl, frozen, k, seqs, cfg, shape });
  if (timing !== undefined) timing.kernelMs += performance.now() - t0;
  // a read past an input's end, a write into an input, two runs that differ: named as such (docs/spec/hazards.md)
  const hazard = hazardVerdict(run.hazards, run.who);
  if (hazard !== null) return hazard;
  return withForm(compareAll(decl, frozen, k, seqs, cfg, run.perSeq, which, exercised, run.who, precision, form, shape), form);
}

// `timing`: the kernel calls' time is added to it (the variants' details, variants.ts)
export const forwardCase = (decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec, exercised: Set<string>, timing?: KernelTiming): CaseOutcome =>
  phaseCase("forward", decl, frozen, nativeBackend(lib), k, exercised, timing);
export const backwardCase = (decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec, exercised: Set<string>, timing?: KernelTiming): CaseOutcome =>
  phaseCase("backward", decl, frozen, nativeBackend(lib), k, exercised, timing);

/** Names the reference in the outcome when it is not the sequential rule. */
function withForm(o: CaseOutcome, form: RefForm): CaseOutcome {
  if (form.gdC === null) return o;
  const ref = `reference: chunk-start GD, C = ${form.gdC} (declared by the kernel)`;
  return { ...o, ...(o.message !== undefined ? { message: `${o.message} [${ref}]` } : {}), details: { ...(o.details ?? {}), reference: ref } };
}
