/**
 * What a conformance check is (docs/spec/conformance.md): a class, a subject, the spec text it enforces,
 * a tolerance, and either one deterministic case or a fast-check property over generated cases.
 */
import type * as fc from "fast-check";
import type { Worst } from "../oracle/compare.ts";

export const CHECK_CLASSES = ["C0", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"] as const;
export type CheckClass = (typeof CHECK_CLASSES)[number];
export type Status = "pass" | "fail" | "vacuous" | "skip" | "error";

export interface Subject {
  op?: string;
  rule?: string;
  frozen?: boolean;
  k?: number;
  backend?: string;
  fixture?: string;
}

/** The result of one case. `vacuous` marks a comparison over (near-)zero values. */
export interface CaseOutcome {
  ok: boolean;
  vacuous?: boolean;
  worst?: Worst;
  message?: string;
}

export type Profile = "quick" | "default" | "deep";
export const PROFILES: readonly Profile[] = ["quick", "default", "deep"];

export interface CheckDef<T = unknown> {
  readonly id: string;
  readonly class: CheckClass;
  readonly subject: Subject;
  /** The spec text this check enforces (file and section). */
  readonly spec: string;
  readonly tolerance: Readonly<Record<string, unknown>>;
  /** Property runs per profile; absent for single-case checks. */
  readonly runs?: Readonly<Record<Profile, number>>;
  readonly arb?: fc.Arbitrary<T>;
  /** A reason to skip instead of running (e.g. a backend that is not available). */
  readonly skip?: string;
  run(input: T): CaseOutcome;
  /**
   * For checks that run elsewhere (a child process per kernel backend, for crash isolation):
   * returns the finished result; `run` is then not called by the engine.
   */
  readonly delegate?: (opts: DelegateOptions) => DelegatedResult;
}

export interface DelegateOptions {
  /** This check's own seed (derived from the run seed and its id, or the replayed one). */
  readonly seed: number;
  /** The run's seed, so a delegate can derive its siblings' seeds exactly as the engine does. */
  readonly runSeed: number;
  readonly profile: Profile;
  /** Set when this check is being replayed: the fast-check path of the one case. */
  readonly replayPath?: string;
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
}
