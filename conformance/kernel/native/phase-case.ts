/**
 * C5 forward and backward cases: the kernel's outputs on a batch of B·H sequences against the
 * TypeScript reference in f64 (ref64) and in f32 (ref32, the bound's yardstick), per tensor and
 * sequence — y and the final state; every input gradient and d(initial state), with dy and
 * d(final state) given or NULL (docs/spec/kernel-abi.md#backward). Judged as every backend's phase
 * case is (cases/kernel-phase.ts); a native or in-process backend's own parts are its batch, the
 * chunk form it declares and its yardstick, the reference in f32 on the f32 copies.
 */
import type { ChunkForm, KernelLib } from "../../../ffi/lib-types.ts";
import type { CaseOutcome } from "../../../harness/check.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { sequencesOf } from "./abi-case.ts";
import type { AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { kernelYardstick, phaseVerdictNow } from "../../../cases/kernel-phase.ts";
import { nativeBackend, type NativeBatch } from "./backend.ts";
import type { KernelBackend } from "../../../cases/kernel-backend.ts";
import type { ReferenceOptions } from "../../../oracle/kernel-reference.ts";
import { chunkFormSymbol } from "../../../ffi/abi.ts";
import { hasChunkStartGd } from "../../../src/rules/chunk-gd.ts";
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
  const options: ReferenceOptions = { gdC: form.gdC, dyNull: k.dyNull, dFinalNull: k.dFinalNull };
  const reference = { phases: which, options };
  return phaseVerdictNow({
    decl, frozen, seqs, cfg, exercised, precision, style: "abi", all: true,
    run: () => {
      const t0 = performance.now();
      const run = backend[which]({ decl, frozen, k, seqs, cfg, shape });
      if (timing !== undefined) timing.kernelMs += performance.now() - t0;
      return run;
    },
    reference,
    // the plain reference on the f32 copies (cases/kernel-phase.ts)
    yardstick: kernelYardstick({ decl, frozen, seqs, cfg, reference, precision }),
    options: { layout: { B: shape.B, H: shape.H, T: shape.T, C: k.C }, prefilled: true },
    judged: (v) => withForm(v, form),
  });
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
