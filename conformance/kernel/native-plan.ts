/**
 * The C5 plan (docs/spec/conformance.md#c5): every C5 check's id, subject, spec anchor, tolerance
 * and run count, generated from the rule registry. Built by the parent, which turns entries into
 * catalogue checks and sends each check's part of the plan (ChildPart, serialisable) to the child
 * that runs it; the child turns a part back into its entry (entryOf) without building the plan.
 *
 * Per backend, per rule of the registry, its frozen variant and SWA:
 *   C5/<backend>/<rule>[.frozen]/forward      y and the final state vs the f64 reference (H ∈ {1,2}, C ∈ {1,4,16})
 *   C5/<backend>/<rule>[.frozen]/backward     every input gradient and d(initial state) vs the f64 reference
 *   C5/<backend>/<rule>/checkpoint            C = 1, 4, 16 bitwise (forward; gradients on cpu-emu); a second backward
 *   C5/<backend>/<rule>/chunks                3 chunks of 8 tokens vs one call of 24
 *   C5/<backend>/<rule>/workspace             the size query: C = 16 needs <= 1/8 of C = 1 (d = 64, T = 256)
 *   C5/<backend>/<rule>/tape-e2e              the rule with the kernel as its inner loop, inside the tape
 *   C5/cpu-emu/<rule>[.frozen]/race           thread order reversed: outputs must be bitwise equal
 *   C5/cpu-emu/<rule>[.frozen]/gpu-blocks     forward and backward with blocks sized as on a GPU
 * plus self-tests of the emulation (cpu-emu only), and the checks the parent runs itself: crash,
 * abort and hang isolation, and the ABI header against the table in ffi/abi.ts. Each rule check
 * declares what it needs of the backend (RULE_CHECK_NEEDS: forward and backward the contract,
 * checkpoint, chunks, workspace and tape-e2e a library's entry points, race and gpu-blocks the
 * emulation's controls), and a backend gets the checks whose needs it offers (cases/kernel-backend.ts Capability).
 */
import { backendSlug } from "../../ffi/backends.ts";
import type { Subject } from "../../harness/check.ts";
import { RULES, ruleByKey } from "../../src/rules/index.ts";
import { variantKey, withDefaults } from "../../src/rules/level.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { RUNS, type Runs } from "../../cases/kernel-batch.ts";
import type { Capability } from "../../cases/kernel-backend.ts";
import {
  RUNS_CHECKPOINT, RUNS_CHUNKS, RUNS_E2E, RUNS_GPU_BLOCKS, RUNS_ONE, RUNS_THREAD_MODE, TOLERANCE, TOL_BITWISE, TOL_CRASH, TOL_EXACT,
  TOL_ISOLATION, TOL_WORKSPACE,
  type CheckTolerance,
} from "./tolerance.ts";

interface EntryBase {
  readonly id: string;
  readonly subject: Subject;
  readonly spec: string;
  readonly tolerance: CheckTolerance;
}

/** A check of one rule variant's kernels: against the reference, against themselves, or inside the tape. */
export interface RuleEntry extends EntryBase {
  readonly kind: "forward" | "backward" | "checkpoint" | "chunks" | "workspace" | "race" | "gpu-blocks" | "tape-e2e";
  readonly decl: RuleDecl;
  readonly frozen: boolean;
  readonly runs: Runs;
  /** What the check needs of the backend (cases/kernel-backend.ts Capability). */
  readonly needs: Capability;
}

/** What each rule check needs of a backend: forward and backward only the contract. */
const RULE_CHECK_NEEDS: Readonly<Record<RuleEntry["kind"], Capability>> = {
  forward: "contract", backward: "contract", checkpoint: "library", chunks: "library", workspace: "library", "tape-e2e": "library",
  race: "emulation", "gpu-blocks": "emulation",
};

/** A self-test of the emulation on the cpu-test library's planted kernels: one deterministic case. */
export interface EmuProbeEntry extends EntryBase {
  readonly kind: "emu-race-detector" | "emu-sync";
}

/** Thread mode against fiber mode, over generated batches of the Delta rule. */
export interface ThreadModeEntry extends EntryBase {
  readonly kind: "emu-thread-mode";
  readonly runs: Runs;
}

/** The faults the test-only kernel nlk_test_crash plants, by its `mode` argument. */
export const FAULTS = ["segv", "abort", "hang"] as const;
export type Fault = (typeof FAULTS)[number];

/** Test only (requested by the isolation checks): a kernel that takes the child process down. */
export interface PlantedEntry extends EntryBase {
  readonly kind: "planted";
  readonly fault: Fault;
}

/** Runs in the parent: a planted fault in a child must become an `error` check, and the suite goes on. */
export interface IsolationEntry extends EntryBase {
  readonly kind: "isolation";
  readonly fault: Fault;
}

/** Runs in the parent: ffi/nlk.h declares what ffi/abi.ts says. */
export interface HeaderEntry extends EntryBase {
  readonly kind: "header";
}

/** The entries a backend's child process runs. */
export type ChildEntry = RuleEntry | EmuProbeEntry | ThreadModeEntry | PlantedEntry;
/** The entries the suite's own process runs. */
export type ParentEntry = IsolationEntry | HeaderEntry;

/**
 * What a native library offers (known by name before it is loaded): the contract and its own entry
 * points; the emulation's controls as well for cpu-emu.
 */
function nativeCapabilities(backend: string): readonly Capability[] {
  return backend === "cpu-emu" ? ["contract", "library", "emulation"] : ["contract", "library"];
}

function ruleEntries(backend: string, decl: RuleDecl, frozen: boolean, slug: string, offers: readonly Capability[]): RuleEntry[] {
  const key = variantKey(decl.key, frozen);
  const subject = { rule: decl.key, frozen, backend };
  const sheet = `docs/spec/conformance.md#c5; ${decl.sheet}${frozen ? " (frozen read, D3)" : ""}; docs/spec/kernel-abi.md#contract`;
  const entry = (kind: RuleEntry["kind"], spec: string, tolerance: CheckTolerance, runs: Runs): RuleEntry =>
    ({ id: `C5/${slug}/${key}/${kind}`, kind, subject: { ...subject, phase: kind, dtype: "f32" }, spec, tolerance, runs, decl, frozen, needs: RULE_CHECK_NEEDS[kind] });
  const out = [
    entry("forward", `${sheet}; docs/spec/precision.md#flash`, TOLERANCE, RUNS),
    entry("backward", `${sheet}; docs/spec/decisions.md#d2; docs/spec/precision.md#flash`, TOLERANCE, RUNS),
  ];
  if (!frozen && ruleHasState(decl)) {
    out.push(entry("checkpoint", `${sheet}; docs/spec/kernel-abi.md#checkpointing; docs/spec/decisions.md#d16`, TOL_BITWISE, RUNS_CHECKPOINT));
    out.push(entry("chunks", `${sheet}; docs/spec/kernel-abi.md#chunks`, TOLERANCE, RUNS_CHUNKS));
    out.push(entry("workspace", `${sheet}; docs/spec/kernel-abi.md#workspace-bound`, TOL_WORKSPACE, RUNS_ONE));
  }
  out.push(entry("race", `${sheet}; cuda/README.md (race check)`, TOL_BITWISE, RUNS));
  out.push(entry("gpu-blocks",
    `${sheet}; cuda/README.md (emulation model): forward and backward with blocks sized as in the cuda build (idle threads)`,
    TOLERANCE, RUNS_GPU_BLOCKS));
  if (!frozen) {
    out.push(entry("tape-e2e",
      `docs/spec/conformance.md#c5; docs/spec/tape.md#opaque blocks; src/rules/level.ts ruleForward(…, inner); ${decl.sheet}`,
      TOLERANCE, RUNS_E2E));
  }
  // a check is generated where the backend offers what it needs
  return out.filter((e) => offers.includes(e.needs));
}

function ruleHasState(decl: RuleDecl): boolean {
  return Object.keys(decl.stateShapes(withDefaults(decl, { d: 8, seq_len: 1 }))).length > 0;
}

/**
 * Every check a backend's child runs in a normal run, in catalogue order; `slug` is the backend's id
 * segment, `offers` what the backend offers (a native library's by its name).
 */
export function c5Plan(backend: string, slug: string = backendSlug(backend), offers: readonly Capability[] = nativeCapabilities(backend)): ChildEntry[] {
  const out: ChildEntry[] = [];
  for (const decl of RULES) {
    for (const frozen of decl.frozen === null ? [false] : [false, true]) out.push(...ruleEntries(backend, decl, frozen, slug, offers));
  }
  if (offers.includes("emulation")) {
    const subject = { backend };
    out.push({
      id: `C5/${slug}/emu/race-detector`, kind: "emu-race-detector", subject, tolerance: TOL_BITWISE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (race check): a planted missing __syncthreads() is caught",
    });
    out.push({
      // reported with the bitwise tolerance, as it always was; the check compares status codes
      id: `C5/${slug}/emu/sync-misuse`, kind: "emu-sync", subject, tolerance: TOL_BITWISE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (emulation model): divergent or abandoned __syncthreads() is an error status, never a hang",
    });
    out.push({
      id: `C5/${slug}/emu/thread-mode`, kind: "emu-thread-mode", subject, tolerance: TOL_BITWISE, runs: RUNS_THREAD_MODE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (emulation model): thread-per-CUDA-thread mode gives the fiber mode's bits",
    });
  }
  return out;
}

export function plantedEntry(backend: string, fault: Fault): PlantedEntry {
  return {
    id: `C5/${backendSlug(backend)}/emu/planted-${fault}`, kind: "planted", subject: { backend }, tolerance: TOL_CRASH,
    spec: "docs/spec/conformance.md#c5; test-only kernel nlk_test_crash", fault,
  };
}

/** A child entry as data: a rule entry's rule by its registry key, every other field as it is. */
export type ChildPart = (Omit<RuleEntry, "decl"> & { readonly rule: string }) | EmuProbeEntry | ThreadModeEntry | PlantedEntry;

/** The part of the plan a child receives for an entry (what JSON carries). */
export function partOf(e: ChildEntry): ChildPart {
  if (!("decl" in e)) return e;
  const { decl, ...rest } = e;
  return { ...rest, rule: decl.key };
}

/** The entry a child runs for a part it received: a rule entry's rule from the registry. */
export function entryOf(p: ChildPart): ChildEntry {
  if (!("rule" in p)) return p;
  const { rule, ...rest } = p;
  return { ...rest, decl: ruleByKey(rule) };
}

const ISOLATION_SPEC: Record<Fault, string> = {
  segv: "docs/spec/conformance.md#c5; cuda/README.md (crash isolation): a kernel that segfaults becomes an error check, the run goes on",
  abort: "docs/spec/conformance.md#c5; cuda/README.md (crash isolation): a kernel that aborts becomes an error check",
  hang: "docs/spec/conformance.md#c5; cuda/README.md (crash isolation): a kernel that never returns is killed at the timeout and becomes an error check",
};
const ISOLATION_NAME: Record<Fault, string> = { segv: "crash", abort: "abort", hang: "hang" };

/** The checks of the machinery itself, run by the parent (after every backend's checks). */
export function parentPlan(): ParentEntry[] {
  const isolation = FAULTS.map((fault): IsolationEntry => ({
    id: `C5/cpu-emu/emu/${ISOLATION_NAME[fault]}-isolation`, kind: "isolation", fault,
    subject: { backend: "cpu-emu" }, spec: ISOLATION_SPEC[fault], tolerance: TOL_ISOLATION,
  }));
  const header: HeaderEntry = {
    id: "C5/abi/generated-files-current", kind: "header", subject: {}, tolerance: TOL_EXACT,
    spec: "docs/spec/kernel-abi.md#one-source: ffi/nlk.h, ffi/abi.gen.ts and cuda/gen/ are what ffi/generate.ts makes from the rule declarations",
  };
  return [...isolation, header];
}
