/**
 * The plan of the kernel checks (docs/spec/conformance.md#c5), for a backend of any kind: every
 * check's id, subject, spec anchor, tolerance and run count, generated from the rule registry by one
 * generator, `kernelPlan`. Built by the parent, which turns entries into catalogue checks (checks.ts)
 * and sends each check's part of the plan (Part, serialisable) to the child that runs it; the child
 * turns a part back into its entry (entryOf) without building the plan.
 *
 * Per backend, per rule of the registry, its frozen variant and SWA, the checks of RULE_CHECKS in
 * their order, each where the backend offers what it needs (cases/kernel-backend.ts Capability):
 *   C5/<slug>/<rule>[.frozen]/forward      y and the final state vs the f64 reference           (contract)
 *   C5/<slug>/<rule>[.frozen]/backward     every input gradient and d(initial state) vs the f64 reference (contract)
 *   C5/<slug>/<rule>/checkpoint            C = 1, 4, 16 bitwise (forward; gradients on cpu-emu); a second backward (library)
 *   C5/<slug>/<rule>/chunks                3 chunks of 8 tokens vs one call of 24               (library)
 *   C5/<slug>/<rule>/workspace             the size query: C = 16 needs <= 1/8 of C = 1 (d = 64, T = 256) (library)
 *   C5/<slug>/<rule>[.frozen]/race         thread order reversed: outputs must be bitwise equal (emulation)
 *   C5/<slug>/<rule>[.frozen]/gpu-blocks   forward and backward with blocks sized as on a GPU   (emulation)
 *   C5/<slug>/<rule>/tape-e2e              the rule with the kernel as its inner loop, inside the tape (library)
 *   C5/<slug>/<rule>/contract              the kernel refuses what it cannot do (contracts.ts)  (refusal)
 * plus, for a backend offering the emulation, self-tests of the emulation; and the checks the parent
 * runs itself (parentPlan): crash, abort and hang isolation, and the ABI header against the table in
 * ffi/abi.ts. What differs by kind of backend (its id segment, its subjects, its spec texts, the
 * tolerance its forward and backward state) is its PlanStyle, passed in as data.
 */
import type { Subject } from "../../harness/check.ts";
import { RULES, ruleByKey } from "../../src/rules/index.ts";
import { variantKey, withDefaults } from "../../src/rules/level.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { RUNS, type Runs } from "../../cases/kernel-batch.ts";
import type { Capability } from "../../cases/kernel-backend.ts";
import {
  RUNS_CHECKPOINT, RUNS_CHUNKS, RUNS_E2E, RUNS_GPU_BLOCKS, RUNS_ONE, RUNS_THREAD_MODE, TOLERANCE, TOL_BITWISE, TOL_EXACT,
  TOL_ISOLATION, TOL_WORKSPACE,
  type CheckTolerance,
} from "./tolerance.ts";

interface EntryBase {
  readonly id: string;
  readonly subject: Subject;
  readonly spec: string;
  readonly tolerance: CheckTolerance;
}

/** The checks of one rule variant, in catalogue order. */
type RuleCheckKind = "forward" | "backward" | "checkpoint" | "chunks" | "workspace" | "race" | "gpu-blocks" | "tape-e2e" | "contract";

/** A check of one rule variant's kernels: against the reference, against themselves, inside the tape, or of what they refuse. */
export interface RuleEntry extends EntryBase {
  readonly kind: RuleCheckKind;
  readonly decl: RuleDecl;
  /** The frozen read of the rule (D3) instead of its active pair. */
  readonly frozen: boolean;
  /** The variant key: `delta` or `delta.frozen`. */
  readonly key: string;
  readonly runs: Runs;
  /** What the check needs of the backend (cases/kernel-backend.ts Capability). */
  readonly needs: Capability;
}

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

/** The entries a backend's checks run (in its child, or where they are called). */
export type ChildEntry = RuleEntry | EmuProbeEntry | ThreadModeEntry | PlantedEntry;
/** The entries the suite's own process runs. */
export type ParentEntry = IsolationEntry | HeaderEntry;

/**
 * What a kind of backend passes to the plan: everything in which its checks' entries differ from
 * another kind's. Data, never a test of the kind's name.
 */
export interface PlanStyle {
  /** The tolerance forward and backward state (the precision rule as the kind's yardstick applies it). */
  readonly tolerance: CheckTolerance;
  /** The dtype a rule check's subject names beside its phase (the ABI's f32), or null: the subject names neither. */
  readonly subjectDtype: NonNullable<Subject["dtype"]> | null;
  /** Each rule check's spec text, for the checks the kind's backends may offer. */
  readonly spec: { readonly [K in RuleCheckKind]?: (decl: RuleDecl, frozen: boolean) => string };
}

/** A configured backend as the plan sees it. */
export interface PlanBackend {
  /** As --backend names it: the subject's backend. */
  readonly name: string;
  /** Its id segment: C5/<slug>/... */
  readonly slug: string;
  /** What it offers (cases/kernel-backend.ts Capability). */
  readonly offers: readonly Capability[];
  readonly style: PlanStyle;
}

/** Which variants of a rule get a check. */
type Variants = "every" | "active" | "active with state";

/** One check of a rule variant: what it needs, which variants get it, its runs and its tolerance ("style": the kind's). */
interface RuleCheck {
  readonly kind: RuleCheckKind;
  readonly needs: Capability;
  readonly variants: Variants;
  readonly runs: Runs;
  readonly tolerance: CheckTolerance | "style";
}

/**
 * The checks of a rule variant, in catalogue order, and what each needs of a backend: forward and
 * backward only the contract; checkpoint, chunks, workspace and tape-e2e a library's entry points;
 * race and gpu-blocks the emulation's controls; contract a kernel host that sends a call the kernel
 * must refuse.
 */
const RULE_CHECKS: readonly RuleCheck[] = [
  { kind: "forward", needs: "contract", variants: "every", runs: RUNS, tolerance: "style" },
  { kind: "backward", needs: "contract", variants: "every", runs: RUNS, tolerance: "style" },
  { kind: "checkpoint", needs: "library", variants: "active with state", runs: RUNS_CHECKPOINT, tolerance: TOL_BITWISE },
  { kind: "chunks", needs: "library", variants: "active with state", runs: RUNS_CHUNKS, tolerance: TOLERANCE },
  { kind: "workspace", needs: "library", variants: "active with state", runs: RUNS_ONE, tolerance: TOL_WORKSPACE },
  { kind: "race", needs: "emulation", variants: "every", runs: RUNS, tolerance: TOL_BITWISE },
  { kind: "gpu-blocks", needs: "emulation", variants: "every", runs: RUNS_GPU_BLOCKS, tolerance: TOLERANCE },
  { kind: "tape-e2e", needs: "library", variants: "active", runs: RUNS_E2E, tolerance: TOLERANCE },
  // a kernel refuses what it cannot do (docs/spec/py-backend.md#contracts): once per rule, on its active pair
  { kind: "contract", needs: "refusal", variants: "active", runs: RUNS, tolerance: {} },
];

function ruleHasState(decl: RuleDecl): boolean {
  return Object.keys(decl.stateShapes(withDefaults(decl, { d: 8, seq_len: 1 }))).length > 0;
}

function variantGets(v: Variants, decl: RuleDecl, frozen: boolean): boolean {
  return v === "every" || (!frozen && (v === "active" || ruleHasState(decl)));
}

function ruleEntries(b: PlanBackend, decl: RuleDecl, frozen: boolean): RuleEntry[] {
  const key = variantKey(decl.key, frozen);
  const out: RuleEntry[] = [];
  for (const c of RULE_CHECKS) {
    // a check is generated where the backend offers what it needs
    if (!b.offers.includes(c.needs) || !variantGets(c.variants, decl, frozen)) continue;
    const spec = b.style.spec[c.kind];
    if (spec === undefined) throw new Error(`the plan style of ${b.name} has no spec text for its ${c.kind} check`);
    const subject: Subject = { rule: decl.key, frozen, backend: b.name, ...(b.style.subjectDtype === null ? {} : { phase: c.kind, dtype: b.style.subjectDtype }) };
    out.push({
      id: `C5/${b.slug}/${key}/${c.kind}`, kind: c.kind, subject, spec: spec(decl, frozen),
      tolerance: c.tolerance === "style" ? b.style.tolerance : c.tolerance, runs: c.runs, decl, frozen, key, needs: c.needs,
    });
  }
  return out;
}

/** The self-tests of the emulation, for a backend offering it. */
function emulationEntries(b: PlanBackend): ChildEntry[] {
  const subject = { backend: b.name };
  return [
    {
      id: `C5/${b.slug}/emu/race-detector`, kind: "emu-race-detector", subject, tolerance: TOL_BITWISE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (race check): a planted missing __syncthreads() is caught",
    },
    {
      // reported with the bitwise tolerance, as it always was; the check compares status codes
      id: `C5/${b.slug}/emu/sync-misuse`, kind: "emu-sync", subject, tolerance: TOL_BITWISE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (emulation model): divergent or abandoned __syncthreads() is an error status, never a hang",
    },
    {
      id: `C5/${b.slug}/emu/thread-mode`, kind: "emu-thread-mode", subject, tolerance: TOL_BITWISE, runs: RUNS_THREAD_MODE,
      spec: "docs/spec/conformance.md#c5; cuda/README.md (emulation model): thread-per-CUDA-thread mode gives the fiber mode's bits",
    },
  ];
}

/** Every check of a backend in a normal run, in catalogue order: each rule, then its frozen read (if any); the emulation's self-tests last. */
export function kernelPlan(b: PlanBackend): ChildEntry[] {
  const out: ChildEntry[] = [];
  for (const decl of RULES) {
    for (const frozen of decl.frozen === null ? [false] : [false, true]) out.push(...ruleEntries(b, decl, frozen));
  }
  if (b.offers.includes("emulation")) out.push(...emulationEntries(b));
  return out;
}

/** A rule entry as data: its rule by its registry key, every other field as it is. */
export type RulePart = Omit<RuleEntry, "decl"> & { readonly rule: string };
/** A child entry as data (what JSON carries). */
export type Part = RulePart | EmuProbeEntry | ThreadModeEntry | PlantedEntry;

/** The part of the plan a child receives for an entry. */
export function partOf(e: ChildEntry): Part {
  if (!("decl" in e)) return e;
  const { decl, ...rest } = e;
  return { ...rest, rule: decl.key };
}

/** The rule entry a child runs for a part it received: its rule from the registry. */
export function ruleEntryOf(p: RulePart): RuleEntry {
  const { rule, ...rest } = p;
  return { ...rest, decl: ruleByKey(rule) };
}

/** The entry a child runs for a part it received. */
export function entryOf(p: Part): ChildEntry {
  return "rule" in p ? ruleEntryOf(p) : p;
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
