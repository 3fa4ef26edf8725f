/**
 * What a conformance check is (docs/spec/conformance.md): a class, a subject, the spec text it enforces,
 * a tolerance, and either one deterministic case or a fast-check property over generated cases.
 */
import type * as fc from "fast-check";
import type { CaseVerdict, Comparison, Worst } from "../oracle/compare.ts";

/**
 * A check's class (docs/spec/conformance.md#classes): the catalogue (conformance/catalogue.ts)
 * declares which there are; the runner, the reports and the harness read fields, never a class.
 */
export type CheckClass = `C${number}`;
export type Status = "pass" | "fail" | "vacuous" | "skip" | "error";

import type { LevelPattern } from "../cases/model-arb.ts";

export type { LevelPattern };

/** What a check is about. Every field is optional: a check fills the ones that apply to it. */
export interface Subject {
  op?: string;
  rule?: string;
  /** The rule's frozen read (D3) rather than its update: only rule variants carry it. */
  frozen?: boolean;
  k?: number;
  /** The model's composition pattern (docs/spec/composition.md); absent for MAG and non-model checks. */
  pattern?: string;
  /** Model checks: which levels update (never called `frozen`, which names the frozen read). */
  levels?: LevelPattern;
  backend?: string;
  /** The part of the subject the check exercises, as its class names it. */
  phase?: string;
  /** The precision of the computation under test; "f64+f32" when one check covers both. */
  dtype?: "f64" | "f32" | "f64+f32";
  fixture?: string;
}

/** The result of one case (oracle/compare.ts). `vacuous` marks a comparison over (near-)zero values. */
export type CaseOutcome = CaseVerdict;

/** A comparison's verdict as a case outcome. */
export function fromComparison(r: Comparison): CaseOutcome {
  // A comparison that stopped before any element (a missing tensor, a loss mismatch) names no worst.
  const worst = r.worst.index < 0 && r.worst.tensor === "" ? undefined : r.worst;
  return { ok: r.ok, vacuous: r.vacuous, worst, message: r.message, ...(r.details ? { details: r.details } : {}) };
}

/**
 * How hard a run looks (docs/spec/conformance.md#profiles): `quick`, `default` and `deep` scale the
 * run counts; `regime` judges kernels at the shapes where they break (docs/spec/conformance.md#regime)
 * and runs every other check as `default` does.
 */
export type Profile = "quick" | "default" | "deep" | "regime";
export const PROFILES: readonly Profile[] = ["quick", "default", "deep", "regime"];

/** Cases per profile: every check counts quick, default and deep; a check without a `regime` count runs its default one there. */
export type ProfileRuns = Readonly<Record<Exclude<Profile, "regime">, number>> & { readonly regime?: number };

/** The cases a check runs under a profile. */
export function runsFor(runs: ProfileRuns, profile: Profile): number {
  return profile === "regime" ? runs.regime ?? runs.default : runs[profile];
}

/** What every check declares: its id, class, subject, the spec anchor it enforces and its tolerance. */
export interface CheckBase {
  readonly id: string;
  readonly class: CheckClass;
  readonly subject: Subject;
  /** The docs/spec anchors this check enforces. */
  readonly spec: string;
  readonly tolerance: Readonly<Record<string, unknown>>;
  /**
   * The command-line options that rebuild the catalogue this check came from (e.g. `--fixtures DIR`,
   * `--backend lib:PATH`), so its replay command works verbatim.
   */
  readonly replayArgs?: readonly string[];
}

/** A fast-check property over generated cases: shrunk on failure, replayable by seed and path. */
export interface PropertyCheck<T> extends CheckBase {
  readonly kind: "property";
  readonly runs: ProfileRuns;
  readonly arb: fc.Arbitrary<T>;
  /**
   * Declared cases run first, before the generated ones (and counted among them): the edge cases a
   * check must always see (fast-check's `examples`; they are not shrunk).
   */
  readonly examples?: readonly T[];
  run(input: T): CaseOutcome;
  /** How a failure message names a case (its sizes and seed; the replay line rebuilds it); default: the case as JSON. */
  describe?(input: T): string;
}

/**
 * A property check whose cases answer later (a kernel in another process): the same check run by
 * the same runner (harness/run.ts), its cases awaited. Not in the catalogue: a kernel child
 * (conformance/kernel/child.ts) runs it.
 */
export interface AsyncPropertyCheck<T> extends Omit<PropertyCheck<T>, "kind" | "run"> {
  readonly kind: "async-property";
  run(input: T): Promise<CaseOutcome>;
}

/**
 * A case after which the check's subject cannot be called again (a kernel that raised, died, hung or
 * broke its contract): the check ends as `error` at once, naming the case, instead of being shrunk
 * through further calls into it.
 */
export class SubjectBroken extends Error {}

/** One deterministic case. */
export interface SingleCheck extends CheckBase {
  readonly kind: "single";
  run(): CaseOutcome;
}

/**
 * A check that runs elsewhere (a child process per kernel backend, for crash isolation): the
 * delegate returns the finished result.
 */
export interface DelegatedCheck extends CheckBase {
  readonly kind: "delegated";
  /** What it needs to run: the runner (conformance/parallel.ts) schedules by this alone. */
  readonly needs: Needs;
  delegate(opts: DelegateOptions): DelegatedResult;
}

/**
 * What a delegated check needs (a check that runs in the runner's own thread needs a core, and
 * declares nothing). The runner names no class and no backend: it groups and prepares by these.
 */
export interface Needs {
  /**
   * The child it runs in (a kernel backend's child process, a Python host, a cross-check process):
   * the delegated checks naming the same child run in one worker thread, one after the other in
   * catalogue order, and share it; different children run at once.
   */
  readonly child: string;
  /**
   * Work done once in the main thread before the children start, when more than one child needs
   * it (building and probing the native kernel backends), instead of once in each worker.
   */
  readonly before?: () => void;
}

/**
 * What the main thread learnt once (a probe of the kernel backends, whether a Python with torch is
 * here) that a worker thread adopts instead of learning it again: `take` gives it as data
 * (undefined: nothing learnt), `adopt` takes it in the worker before its catalogue is built, and
 * `prepare` learns it now for checks that every worker will run (a sweep's).
 */
export interface Handover {
  take(): unknown;
  adopt(value: unknown): void;
  prepare?(defs: readonly CheckDef[]): void;
}

/** A check that cannot run here (e.g. a backend that is not available), with the reason. */
export interface SkippedCheck extends CheckBase {
  readonly kind: "skipped";
  readonly reason: string;
  /** The skip's details (UNDECLARED_DETAILS for a rule its kernel does not implement). */
  readonly details?: Readonly<Record<string, unknown>>;
}

/**
 * The details of a kernel check's skip whose rule variant its backend does not implement (a library
 * that does not export it, a py: kernel that does not declare it): no check of the run, left out
 * of the report and summed up in one line per backend (docs/spec/conformance.md#undeclared).
 */
export const UNDECLARED_DETAILS = { undeclared: true } as const;

/** Whether a result is the skip of a rule its kernel does not implement. */
export const isUndeclared = (r: Pick<CheckResult, "status" | "details">): boolean => r.status === "skip" && r.details?.undeclared === true;

export type CheckDef<T = any> = PropertyCheck<T> | SingleCheck | DelegatedCheck | SkippedCheck;

export interface DelegateOptions {
  /** This check's own seed (derived from the run seed and its id, or the replayed one). */
  readonly seed: number;
  /** The run's seed, so a delegate can derive its siblings' seeds exactly as the engine does. */
  readonly runSeed: number;
  readonly profile: Profile;
  /** Set when this check is being replayed: the fast-check path of the one case. */
  readonly replayPath?: string;
  /** With a replay: the folder its case's tensors are written to (harness/dump.ts). */
  readonly replayDump?: string;
  /** Ids of every check selected in this run (a delegate may batch its siblings among them). */
  readonly selected: ReadonlySet<string>;
}

export interface DelegatedResult {
  status: Status;
  runs: number;
  seed: number;
  path: string;
  worst?: Worst;
  message?: string;
  /** The check's own time where it ran elsewhere (else the delegate call's time is reported). */
  ms?: number;
  details?: Readonly<Record<string, unknown>>;
}

export interface CheckResult {
  id: string;
  class: CheckClass;
  subject: Subject;
  status: Status;
  worst?: Worst;
  tolerance: Readonly<Record<string, unknown>>;
  runs: number;
  seed: number;
  path: string;
  replay: string;
  ms: number;
  message?: string;
  spec: string;
  /** The reported case's measurements (the failing case, else the one with the worst error). */
  details?: Readonly<Record<string, unknown>>;
}
