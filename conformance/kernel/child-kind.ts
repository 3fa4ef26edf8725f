/**
 * What a kind of kernel backend supplies to the one child program (child.ts): how its backend is
 * opened for a batch, each check's definition on it, what is done around each check's run and what
 * its result adds, and (a kind that probes) the probe. The child's table of kinds (child.ts) names
 * each kind's module, loaded only by a child of that kind.
 */
import { join } from "node:path";
import type { AsyncPropertyCheck, CheckDef, CheckResult } from "../../harness/check.ts";
import type { BatchRequest, ChildCheckRequest } from "../../harness/child-process.ts";
import { CONFIG_LIMIT_ENV, type ConfigLimit } from "../../harness/configurations.ts";
import { childEnvironment } from "../../environment.ts";
import type { ChildEntry, Part } from "./plan.ts";

/** The kinds of the child's table (child.ts CHILD_KINDS), by the name the child is started with. */
export type ChildKindName = "native" | "python";

/**
 * How a kind's parent starts the one child program: its command line (`args` after the kind's
 * name) and environment, the run's configuration limit (`limit`, catalogue-settings.ts) among it
 * as NLC_KERNEL_CONFIGS, and what the kind adds (`env`).
 */
export function childCommand(kind: ChildKindName, args: readonly string[], limit: ConfigLimit | undefined, env: Readonly<Record<string, string | undefined>> = {}) {
  const configs = limit !== undefined ? { [CONFIG_LIMIT_ENV]: limit } : {};
  return { cmd: [process.execPath, join(import.meta.dir, "child.ts"), kind, ...args], env: childEnvironment({ ...env, ...configs }) };
}

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
