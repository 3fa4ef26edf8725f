/**
 * The kernel checks in the catalogue, for a backend of any kind (docs/spec/conformance.md#c5;
 * docs/spec/kernel-abi.md#backend-kinds): the plan's entries (plan.ts) of each configured backend
 * as delegated checks. What differs by kind is supplied by the kind (a KernelKind): what the plan
 * is told of a backend, how its checks run — in a child process, as one batch of every selected
 * check of the backend started by the first of them that runs (a fresh child after a crash), the
 * results cached and handed to each check in turn; or each where it is called — what they need of
 * the scheduler, their replay arguments and a verdict before running (an unavailable backend).
 */
import type { CheckDef, CheckResult, DelegatedCheck, DelegatedResult, DelegateOptions, Needs } from "../../harness/check.ts";
import { ChildResults, type BatchEntry, type BatchRequest } from "../../harness/child-process.ts";
import { kernelPlan, partOf, type ChildEntry, type Part, type PlanBackend } from "./plan.ts";

/** How a kind's checks run: a batch in a child process (the parts of the plan it is sent), or each check where it is called. */
export type KernelRuns =
  | { readonly batch: (req: BatchRequest<Part>) => Map<string, CheckResult> }
  | { readonly here: (backend: string, e: ChildEntry) => (opts: DelegateOptions) => DelegatedResult };

/** What a kind of backend supplies to the catalogue of its kernel checks. */
export interface KernelKind {
  /** A configured backend as the plan sees it: its id segment, what it offers, its plan style. */
  plan(backend: string): PlanBackend;
  readonly runs: KernelRuns;
  /** What a check of the backend needs of the scheduler (the batch it shares, what runs first). */
  needs(backend: string): Needs;
  /** What a check's replay line adds (the backend, where its checks exist only when it is configured), or nothing. */
  replayArgs(backend: string): readonly string[] | undefined;
  /** A check's verdict before it runs (its backend unavailable or broken), or null: it runs. */
  verdict?(backend: string, seed: number): DelegatedResult | null;
}

/** The children's results, one batch answering every selected check of its backend. */
const results = new ChildResults();

/**
 * How check `e` of `backend` runs: its kind's verdict first; then, for a kind whose checks run in a
 * child, its result from an earlier batch of the backend, or the batch it asks for (`siblings`: each
 * check of the backend with its part of the plan, as data); else where it is called.
 */
function delegate(kind: KernelKind, backend: string, e: ChildEntry, siblings: readonly BatchEntry<Part>[]): (opts: DelegateOptions) => DelegatedResult {
  const runs = kind.runs;
  if ("here" in runs) {
    const run = runs.here(backend, e);
    return (opts) => kind.verdict?.(backend, opts.seed) ?? run(opts);
  }
  const batch = runs.batch;
  return (opts) => {
    const known = kind.verdict?.(backend, opts.seed) ?? results.cached(e.id, opts);
    if (known !== undefined) return known;
    const req = ChildResults.request(backend, e.id, opts, siblings);
    return results.keep(req, batch(req), e.id, opts);
  };
}

/** The checks of one configured backend of a kind, in the plan's order. */
function backendChecks(kind: KernelKind, backend: string): CheckDef[] {
  const plan = kernelPlan(kind.plan(backend));
  const siblings = plan.map((e) => ({ id: e.id, part: partOf(e) }));
  const replayArgs = kind.replayArgs(backend);
  return plan.map((e): DelegatedCheck => ({
    kind: "delegated", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance,
    needs: kind.needs(backend),
    ...(replayArgs !== undefined ? { replayArgs: [...replayArgs] } : {}),
    delegate: delegate(kind, backend, e, siblings),
  }));
}

/** The checks of every configured backend of a kind, backend after backend. */
export function kernelChecks(kind: KernelKind, backends: readonly string[]): CheckDef[] {
  return backends.flatMap((b) => backendChecks(kind, b));
}
