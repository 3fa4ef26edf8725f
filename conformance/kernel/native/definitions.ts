/**
 * The child's definitions of the plan's entries: the CheckDef runCheck runs, and for the
 * flash-attention checks the coverage rule applied to its result.
 */
import * as fc from "fast-check";
import type { KernelLib } from "../../../ffi/lib-types.ts";
import type { CaseOutcome, CheckDef, CheckResult, Profile, PropertyCheck } from "../../../harness/check.ts";
import { UNDECLARED_DETAILS } from "../../../harness/check.ts";
import { otherEnumValues, ruleCaseSpecArb, type RuleCaseSpec } from "../../../cases/rule-case.ts";
import { ruleByKey } from "../../../src/rules/index.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { SATURATED_LABEL } from "../../../cases/edge-gates.ts";
import { chunkExample } from "./abi-case.ts";
import { coverage } from "../../../oracle/kernel-judge.ts";
import {
  DEFAULT_KERNEL_CHUNKS, caseArb, describeAbiCase, describeRuleCase, saturatedExample, sizesFor, withEnumExamples, type AbiCaseSpec,
} from "../../../cases/kernel-batch.ts";
import { phaseCheck, plus } from "../phase-check.ts";
import { ShapeTally, withShapes } from "../../../cases/kernel-shapes.ts";
import { expectedTensors } from "../../../cases/kernel-tensors.ts";
import { THREAD_MODE_RULE, plantedFault, raceDetector, syncMisuse, threadMode } from "./emu-selftest.ts";
import { phaseCase } from "./phase-case.ts";
import { nativeBackend, type NativeBatch } from "./backend.ts";
import type { KernelBackend, KernelDeclaration } from "../../../cases/kernel-backend.ts";
import { E2E_CHECKPOINT, e2eCase, gpuBlocksCase, raceCase } from "./library-cases.ts";
import type { ChildEntry, RuleEntry } from "../plan.ts";
import { CHUNK_T, checkpointCase, chunkCase, workspaceBound } from "./checkpoint.ts";
import { ConfigTally, configLimit } from "../../../harness/configurations.ts";
import { acrossVariants, withVariants } from "./variants.ts";

export interface ChildCheck {
  def: CheckDef;
  /** Applied to the finished result (coverage: a tensor never exercised makes a pass vacuous). */
  after?: (r: CheckResult) => CheckResult;
}

function base(e: ChildEntry) {
  return { id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance } as const;
}

/**
 * Why the entry's kernels are not judged (the backend's declaration: not implemented, or a
 * precision C5 has no rule for), or null. A pair storing bf16 or f16 is judged by every check except
 * tape-e2e, which runs the kernel inside the f32 tape: the tape's values would be rounded on their
 * way through the ABI, and forward and backward already judge the pair at its own precision.
 */
function skipReason(e: RuleEntry, declared: KernelDeclaration): string | null {
  if (declared.skip !== null) return declared.skip;
  const p = declared.precision.forward;
  if (e.kind === "tape-e2e" && (p.storage !== "f32" || p.state !== "f32")) {
    const fn = `nlk_${e.decl.key}_forward`;
    return `${fn} stores ${p.storage} (state ${p.state}): tape-e2e runs the kernel inside the f32 tape; the pair is judged at its own precision by forward, backward and chunks (docs/spec/precision.md#declaration)`;
  }
  return null;
}

/**
 * The checks that compare a pair with the sequential rule through other paths than forward and
 * backward (chunks, tape-e2e) are skipped for a pair declaring chunk-start GD: its function is
 * a different rule, judged by forward and backward against the chunk-start GD reference
 * (docs/spec/kernel-abi.md#chunk-form).
 */
function chunkFormSkip(e: RuleEntry, declared: KernelDeclaration): string | null {
  if (e.frozen || (e.kind !== "chunks" && e.kind !== "tape-e2e")) return null;
  const f = declared.chunkForm;
  if (typeof f === "string" || f.kind !== "chunk-start-gd") return null;
  return `the pair declares chunk-start GD (C = ${f.C}): it computes that form, not the sequential rule this check runs; ` +
    `its forward and backward are compared with the chunk-start GD reference (docs/spec/kernel-abi.md#chunk-form)`;
}

/**
 * The check of a rule entry on a backend that answers at once (cases/kernel-backend.ts): forward
 * and backward go through the contract; the other entries call a native library's own entry
 * points (`lib`; null for a backend that is not one, which has no such entries).
 */
function ruleCheck(e: RuleEntry, backend: KernelBackend<NativeBatch, true>, lib: KernelLib | null, profile: Profile): ChildCheck {
  const native = (): KernelLib => {
    if (lib === null) throw new Error(`${e.id}: ${backend.name} is not a native library, and ${e.kind} calls a library's entry points`);
    return lib;
  };
  const declaration = backend.declare(e.decl.key, e.frozen);
  const skip = skipReason(e, declaration) ?? chunkFormSkip(e, declaration);
  if (skip !== null) return { def: { ...base(e), kind: "skipped", reason: skip, ...(declaration.skip !== null && declaration.undeclared ? { details: UNDECLARED_DETAILS } : {}) } };
  const { decl, frozen, runs } = e;
  const exercised = new Set<string>();
  // the chunk size a pair declares (an exact or chunk-start GD chunk form, docs/spec/kernel-abi.md#chunk-sizes),
  // or null: a sequential pair, or a frozen read, is judged at DEFAULT_KERNEL_CHUNKS
  const declared = declaration.chunkSizes?.[0] ?? null;
  const chunks = declared === null ? DEFAULT_KERNEL_CHUNKS : [declared];
  // every kernel check reports the shapes it ran (docs/spec/conformance.md#shapes)
  const tally = new ShapeTally();
  const shaped = (after?: (r: CheckResult) => CheckResult) => (r: CheckResult) => withShapes(after === undefined ? r : after(r), tally);
  const covered = (expected: string[]) => shaped((r: CheckResult) => coverage(r, expected, exercised));
  const tallied = <T>(run: (k: AbiCaseSpec) => T) => (k: AbiCaseSpec): T => {
    tally.add({ B: k.B, T: k.base.seq_len, H: k.H, d: k.base.d }, declared ?? k.C);
    return run(k);
  };
  // forward and backward run the regimes under the regime profile; every batch check runs the
  // declared cases (phase-check.ts), the saturated case (docs/spec/conformance.md#regime) after them
  const batches = (run: (k: AbiCaseSpec) => CaseOutcome, regimes = false): PropertyCheck<any> => {
    const one = tallied(run);
    const saturated = saturatedExample(decl, frozen, Math.min(...chunks), "abi");
    // a failure of the saturated case names it
    const named = (k: AbiCaseSpec): CaseOutcome => {
      const o = one(k);
      return k.saturated === true && !o.ok ? { ...o, message: `case ${SATURATED_LABEL}: ${o.message ?? "failed"}` } : o;
    };
    return phaseCheck(e, base(e), {
      form: "abi", answers: "now", chunks, one: named, describe: describeAbiCase, chunkOf: (k) => k.C, declared: { afterGuard: saturated === null ? [] : [saturated] },
    }, profile, regimes) as PropertyCheck<any>;
  };
  // forward and backward run under each variant the pair exports (docs/spec/kernel-abi.md#variants)
  const variants = () => (frozen || lib === null ? null : lib.variants(decl.key));
  const inVariants = (after: (r: CheckResult) => CheckResult, tally: ConfigTally) => (r: CheckResult) => withVariants(after(r), tally);
  switch (e.kind) {
    case "forward": {
      const v = variants(), vt = new ConfigTally(configLimit(), "variants");
      return {
        def: batches((k) => acrossVariants(v, vt, (t) => phaseCase("forward", decl, frozen, backend, k, exercised, t)), true),
        after: inVariants(covered(expectedTensors("forward", decl, frozen)), vt),
      };
    }
    case "backward": {
      const v = variants(), vt = new ConfigTally(configLimit(), "variants");
      return {
        def: batches((k) => acrossVariants(v, vt, (t) => phaseCase("backward", decl, frozen, backend, k, exercised, t)), true),
        after: inVariants(covered(expectedTensors("backward", decl, frozen)), vt),
      };
    }
    case "gpu-blocks":
      return {
        def: batches((k) => gpuBlocksCase(decl, frozen, native(), k, exercised)),
        after: covered([...expectedTensors("forward", decl, frozen), ...expectedTensors("backward", decl, frozen)]),
      };
    case "race":
      return { def: batches((k) => raceCase(decl, frozen, native(), k)), after: shaped() };
    case "checkpoint":
      // our kernels replay the forward's own step, so the gradients are bitwise equal for every C
      return { def: batches((k) => checkpointCase(decl, native(), k, native().emu !== null)), after: shaped() };
    case "chunks": {
      const examples = otherEnumValues(decl, chunkExample(decl, CHUNK_T).base).length === 0 ? [] : withEnumExamples(decl, false, chunkExample(decl, CHUNK_T));
      const def: PropertyCheck<AbiCaseSpec> = {
        ...base(e), kind: "property", runs: plus(runs, examples.length), arb: caseArb(decl, false, profile, "abi", { d: [1, 8], seq_len: [CHUNK_T, CHUNK_T] }),
        ...(examples.length === 0 ? {} : { examples }), describe: describeAbiCase,
        run: tallied((k) => chunkCase(decl, native(), k, exercised)),
      };
      return { def, after: covered(expectedTensors("backward", decl, false)) };
    }
    case "workspace":
      return { def: { ...base(e), kind: "single", run: () => workspaceBound(decl, native()) } };
    case "tape-e2e": {
      // one sequence through the whole rule: the rule's own case generator, and a fixed first case
      // from a random state (tapeE2eExamples)
      const examples = tapeE2eExamples(decl);
      const def: PropertyCheck<RuleCaseSpec> = {
        ...base(e), kind: "property", runs: plus(runs, examples.length), arb: ruleCaseSpecArb(decl, sizesFor(profile)), examples, describe: describeRuleCase,
        run: (spec) => {
          tally.add({ B: 1, T: spec.seq_len, H: 1, d: spec.d }, declared ?? E2E_CHECKPOINT);
          return e2eCase(decl, native(), spec, exercised);
        },
      };
      return { def, after: covered(expectedTensors("tape-e2e", decl, frozen)) };
    }
    case "contract":
      throw new Error(`${e.id}: ${backend.name} has no kernel host to send a call it must refuse (the plan gives contract checks to backends offering refusal)`);
  }
}

/**
 * tape-e2e's fixed examples: a case from a random state (d = 4, T = 8, drawn once with seed 1),
 * then the same case at every other value of each enumerated hyperparameter. A tape-e2e case is
 * one sequence, and from the MLP memories' D4 init state (W2 = 0, W1 ~ 1e-2) the read y stays
 * below the vacuity threshold in most generated cases (YAAD 70%, MONETA 39%), so a run whose
 * cases all start there never exercises y (YAAD: vacuous at 3 of 40 quick seeds). The random
 * state makes every rule's read live in the first case, at every seed
 * (docs/spec/conformance.md#enum-examples).
 */
export function tapeE2eExamples(decl: RuleDecl): RuleCaseSpec[] {
  const [drawn] = fc.sample(ruleCaseSpecArb(decl, { d: [4, 4], seq_len: [8, 8] }), { seed: 1, numRuns: 1 });
  const first: RuleCaseSpec = { ...drawn!, state: "random" };
  return [first, ...otherEnumValues(decl, first)];
}

/** The definition of an entry. `lib` is the backend's library; `testLib` the cpu-test build (loaded on demand). */
export function childCheck(e: ChildEntry, lib: KernelLib, profile: Profile, testLib: () => KernelLib): ChildCheck {
  switch (e.kind) {
    case "forward":
    case "backward":
    case "checkpoint":
    case "chunks":
    case "workspace":
    case "gpu-blocks":
    case "race":
    case "tape-e2e":
    case "contract":
      return ruleCheck(e, nativeBackend(lib), lib, profile);
    case "emu-race-detector":
      return { def: { ...base(e), kind: "single", run: () => raceDetector(testLib()) } };
    case "emu-sync":
      return { def: { ...base(e), kind: "single", run: () => syncMisuse(testLib()) } };
    case "emu-thread-mode":
      return { def: { ...base(e), kind: "property", runs: e.runs, arb: caseArb(ruleByKey(THREAD_MODE_RULE), false, profile, "abi"), run: (k) => threadMode(lib, k) } };
    case "planted":
      return { def: { ...base(e), kind: "single", run: () => plantedFault(testLib(), e.fault) } };
  }
}

/** Whether the entry runs kernels of the cpu-test library (planted race, sync misuse, faults). */
export function needsTestLib(e: ChildEntry): boolean {
  return e.kind === "planted" || e.kind === "emu-race-detector" || e.kind === "emu-sync";
}

/**
 * The forward or backward check of a rule entry on a backend that answers at once, run where it is
 * called (an in-process kernel, conformance/kernel/native/in-process.ts): its definition, and the coverage
 * rule applied to its result.
 */
export function backendPhaseCheck(e: RuleEntry & { kind: "forward" | "backward" }, backend: KernelBackend<NativeBatch, true>, profile: Profile): ChildCheck {
  return ruleCheck(e, backend, null, profile);
}
