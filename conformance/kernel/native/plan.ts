/**
 * What a native library passes to the one plan (plan.ts): its id segment (ffi/backends.ts
 * backendSlug), what it offers, known by its name before it is loaded (the contract and its own
 * entry points; the emulation's controls as well for cpu-emu), and its plan style: subjects naming
 * the phase and the ABI's dtype, the spec texts of its checks, the judge's tolerance. An in-process
 * backend takes the native batch and so the same style, offering the contract alone.
 */
import { backendSlug } from "../../../ffi/backends.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import type { Capability } from "../../../cases/kernel-backend.ts";
import type { PlanBackend, PlanStyle, PlantedEntry, Fault } from "../plan.ts";
import { TOLERANCE, TOL_CRASH } from "../tolerance.ts";

/** The citation every check of a rule variant starts with. */
const sheet = (decl: RuleDecl, frozen: boolean) =>
  `docs/spec/conformance.md#c5; ${decl.sheet}${frozen ? " (frozen read, D3)" : ""}; docs/spec/kernel-abi.md#contract`;

/** The checks of a backend that takes the native ABI's batch, as the report states them. */
export const NATIVE_STYLE: PlanStyle = {
  tolerance: TOLERANCE,
  subjectDtype: "f32",
  spec: {
    forward: (decl, frozen) => `${sheet(decl, frozen)}; docs/spec/precision.md#flash`,
    backward: (decl, frozen) => `${sheet(decl, frozen)}; docs/spec/decisions.md#d2; docs/spec/precision.md#flash`,
    checkpoint: (decl, frozen) => `${sheet(decl, frozen)}; docs/spec/kernel-abi.md#checkpointing; docs/spec/decisions.md#d16`,
    chunks: (decl, frozen) => `${sheet(decl, frozen)}; docs/spec/kernel-abi.md#chunks`,
    workspace: (decl, frozen) => `${sheet(decl, frozen)}; docs/spec/kernel-abi.md#workspace-bound`,
    race: (decl, frozen) => `${sheet(decl, frozen)}; cuda/README.md (race check)`,
    "gpu-blocks": (decl, frozen) =>
      `${sheet(decl, frozen)}; cuda/README.md (emulation model): forward and backward with blocks sized as in the cuda build (idle threads)`,
    "tape-e2e": (decl) =>
      `docs/spec/conformance.md#c5; docs/spec/tape.md#opaque blocks; src/rules/level.ts ruleForward(…, inner); ${decl.sheet}`,
  },
};

/** What a native library offers: the contract and its own entry points; the emulation's controls as well for cpu-emu. */
function nativeCapabilities(backend: string): readonly Capability[] {
  return backend === "cpu-emu" ? ["contract", "library", "emulation"] : ["contract", "library"];
}

/** A native library (cpu-emu, cuda, lib:<path>, ...) as the plan sees it. */
export function nativePlanBackend(name: string): PlanBackend {
  return { name, slug: backendSlug(name), offers: nativeCapabilities(name), style: NATIVE_STYLE };
}

/** Test only (the isolation checks request it): the cpu-test library's kernel that takes the child process down. */
export function plantedEntry(backend: string, fault: Fault): PlantedEntry {
  return {
    id: `C5/${backendSlug(backend)}/emu/planted-${fault}`, kind: "planted", subject: { backend }, tolerance: TOL_CRASH,
    spec: "docs/spec/conformance.md#c5; test-only kernel nlk_test_crash", fault,
  };
}
