/**
 * What a kind of kernel backend supplies to the one child program (child.ts): how its backend is
 * opened for a batch, each check's definition on it, what is done around each check's run and what
 * its result adds, and (a kind that probes) the probe. The child's table of kinds (child.ts) names
 * each kind's module, loaded only by a child of that kind.
 */
import type { AsyncPropertyCheck, CheckDef, CheckResult } from "../../harness/check.ts";
import type { BatchRequest, ChildCheckRequest } from "../../harness/child-process.ts";
import type { ChildEntry, Part } from "./plan.ts";

/** A check as its kind defines it: what the runner runs and what the result adds, or its result without running (a declared skip). */
export type Defined =
  | { readonly def: CheckDef | AsyncPropertyCheck<any>; readonly after?: (r: CheckResult) => CheckResult }
  | { readonly result: CheckResult };

/** A backend opened for a batch. */
export interface ChildSession {
  define(e: ChildEntry, c: ChildCheckRequest<Part>, seed: number): Defined | Promise<Defined>;
  /** Before and after each check's run (a native kind's call watchdog). */
  starting?(): void;
  finished?(): void;
  close(): void | Promise<void>;
}

export interface ChildKind {
  /** The backend opened for the batch, or the result of every check when it cannot be (unavailable, broken). */
  open(req: BatchRequest<Part>): Promise<ChildSession | { readonly results: (id: string, seed: number) => CheckResult }>;
  /** Prints the probe line of the backends named in the child's arguments (--backends a,b). */
  probe?(args: readonly string[]): Promise<void>;
}
