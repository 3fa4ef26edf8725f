/**
 * The one runner of a plan (conformance/plan.ts), for `npm run conformance` and `bun test` alike
 * (docs/spec/conformance.md#one-scheduler): the delegated checks run beside the in-process ones.
 * Delegated checks of one class share a batch (one kernel child per backend, one cross-check run;
 * each py: backend a batch of its own), so each batch goes to one worker thread, in catalogue order, at most LANES at
 * once; a check may name its
 * own batch (the crash-isolation checks do: their children mostly wait, the hang one for its whole
 * timeout, and so overlap the kernel checks instead of following them). A run with a single lane
 * of work (one batch and nothing else, e.g. one kernel backend's checks) and replays run in the
 * main thread: a worker would only add its start-up. NLC_SERIAL=1 runs everything in the main thread.
 */
import type { CheckDef, CheckResult, Profile } from "../harness/check.ts";
import { gateMinPower } from "../harness/report-power.ts";
import type { BackendInfo } from "../harness/report.ts";
import type { InterruptSignal } from "../oracle/child-signals.ts";
import { interruptedBy } from "../harness/interrupt.ts";
import { runCheck } from "../harness/run.ts";
import type { RunPlan } from "./plan.ts";
import { availableParallelism } from "node:os";
import type { Resolved } from "../ffi/backends.ts";
import { probeBackends, probedBackends } from "./c5/spawn.ts";

export interface WorkerJob {
  ids: string[];
  seed: number;
  profile: Profile;
  fixtureDirs: string[];
  selected: string[];
  /** The kernel backends as the main thread probed them (a lib: backend's preflight), so a worker does not probe again. */
  probed?: Resolved[];
  /**
   * The backend lists the catalogue is built from (NLC_BACKENDS, NLC_PY_BACKENDS) as the main thread
   * set them from --backend: a worker does not see the main thread's later changes to process.env.
   */
  backendEnv: { NLC_BACKENDS?: string; NLC_PY_BACKENDS?: string };
}

export type WorkerMessage =
  | { kind: "result"; result: CheckResult }
  | { kind: "done"; backends: BackendInfo[]; interrupt: InterruptSignal | null }
  | { kind: "failed"; message: string };

export interface WorkerOutcome {
  backends: BackendInfo[];
  interrupt: InterruptSignal | null;
}

/**
 * The batch of a delegated check: its own `batch`; else, for a py: backend, its class and backend
 * (one Python host per backend, independent of the others); else its class (the native kernel
 * backends are built and probed together, once, by the first C5 check of the run).
 */
export function batchOf(d: CheckDef): string {
  if (d.kind === "delegated" && d.batch !== undefined) return d.batch;
  return d.subject.backend?.startsWith("py:") ? `${d.class} ${d.subject.backend}` : d.class;
}

/**
 * How many batches run at once, each in its own worker thread: one per core and one more, since
 * batches mostly wait on their child processes (kernel children, Python hosts, the hang check).
 */
export const LANES = Math.max(3, availableParallelism() + 1);

/** The batches whose delegated checks go to a worker, with their ids in catalogue order. */
export function delegatedBatches(defs: readonly CheckDef[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const d of defs) {
    if (d.kind !== "delegated") continue;
    const key = batchOf(d);
    const ids = out.get(key) ?? [];
    ids.push(d.id);
    out.set(key, ids);
  }
  return out;
}

export function parallelEnabled(env: Record<string, string | undefined> = process.env): boolean {
  return env.NLC_SERIAL !== "1";
}

/** Runs one batch in a worker thread; `onResult` sees each result as it arrives. */
export function runBatchInWorker(job: WorkerJob, onResult: (r: CheckResult) => void): { done: Promise<WorkerOutcome>; stop(): void } {
  const worker = new Worker(new URL("./delegate-worker.ts", import.meta.url).href);
  const done = new Promise<WorkerOutcome>((resolve, reject) => {
    worker.onmessage = (ev: MessageEvent<WorkerMessage>) => {
      const m = ev.data;
      if (m.kind === "result") onResult(m.result);
      else if (m.kind === "done") {
        worker.terminate();
        resolve({ backends: m.backends, interrupt: m.interrupt });
      } else {
        worker.terminate();
        reject(new Error(`a check worker failed: ${m.message}`));
      }
    };
    worker.onerror = (e) => {
      worker.terminate();
      reject(new Error(`a check worker failed: ${e.message}`));
    };
  });
  worker.postMessage(job);
  return { done, stop: () => worker.terminate() };
}

/**
 * The report's backends: the main thread's list, where a worker probed a backend (it ran C5) its
 * findings instead of "not probed".
 */
export function mergeBackendInfo(main: readonly BackendInfo[], fromWorkers: readonly BackendInfo[][]): BackendInfo[] {
  // "not probed" (a kernel backend) and "not run" (a py: backend): this thread did not run its checks.
  const unknown = (b: BackendInfo) => !b.available && /^not (probed|run)/.test(b.reason ?? "");
  return main.map((b) => {
    if (!unknown(b)) return b;
    for (const list of fromWorkers) {
      const w = list.find((x) => x.name === b.name);
      if (w !== undefined && !unknown(w)) return w;
    }
    return b;
  });
}

/** Whether worker threads pay: more than one lane of work (in-process checks, batches), not a replay. */
export function workersPay(defs: readonly CheckDef[], batches: ReadonlyMap<string, string[]>): boolean {
  const inline = defs.some((d) => d.kind === "property" || d.kind === "single");
  return (inline ? 1 : 0) + batches.size > 1;
}

export interface RunHooks {
  /** Each result as it is recorded (in the order the checks finish). */
  onResult?(r: CheckResult, finished: number, total: number): void;
  /** Before a delegated check runs in this thread (its child may print). */
  beforeDelegated?(def: CheckDef): void;
}

export interface RunOutcome {
  /** The results in catalogue order; fewer than the plan's checks when the run was interrupted. */
  results: CheckResult[];
  backends: BackendInfo[];
  interrupt: InterruptSignal | null;
}

/** Runs a plan: in-process checks here, delegated batches in worker threads when that pays. */
export async function runPlan(plan: RunPlan, hooks: RunHooks = {}): Promise<RunOutcome> {
  const { defs, selected, request } = plan;
  const { seed, profile, replay } = request;
  const slots: (CheckResult | undefined)[] = new Array(defs.length);
  const position = new Map(defs.map((d, i) => [d.id, i]));
  let finished = 0;
  let stopped = false;
  const record = (result: CheckResult) => {
    if (stopped) return;
    const r = gateMinPower(result, request.minPower);
    slots[position.get(r.id)!] = r;
    finished++;
    hooks.onResult?.(r, finished, defs.length);
  };
  const all = delegatedBatches(defs);
  const batches = replay === undefined && parallelEnabled() && workersPay(defs, all) ? all : new Map<string, string[]>();
  const inWorker = new Set([...batches.values()].flat());
  // Native kernel checks in more than one batch (the kernel checks, the crash-isolation checks):
  // build and probe the backends once, here, and hand the result to every worker.
  const byId = new Map(defs.map((d) => [d.id, d]));
  const native = (ids: string[]) => ids.some((id) => byId.get(id)!.class === "C5" && !batchOf(byId.get(id)!).includes("py:"));
  if ([...batches.values()].filter(native).length > 1) probeBackends();
  // At most LANES batches at once, in catalogue order; each lane takes the next batch when its own ends.
  const queue = [...batches.values()];
  const active = new Set<{ stop(): void }>();
  const workerBackends: BackendInfo[][] = [];
  let workerInterrupt: InterruptSignal | null = null;
  const lane = async (): Promise<void> => {
    for (let ids = queue.shift(); ids !== undefined && !stopped && interruptedBy() === null && workerInterrupt === null; ids = queue.shift()) {
      const w = runBatchInWorker({ ids, seed, profile, fixtureDirs: request.fixtureDirs, selected: [...selected], probed: probedBackends(),
        backendEnv: { NLC_BACKENDS: process.env.NLC_BACKENDS, NLC_PY_BACKENDS: process.env.NLC_PY_BACKENDS } }, record);
      active.add(w);
      try {
        const o = await w.done;
        workerBackends.push(o.backends);
        workerInterrupt ??= o.interrupt;
      } catch (e) {
        console.error(`conformance: ${e instanceof Error ? e.message : String(e)}; its checks run here instead`);
      } finally {
        active.delete(w);
      }
    }
  };
  const workers = Array.from({ length: Math.min(LANES, queue.length) }, lane);
  const runInline = async (def: CheckDef) => {
    // Between checks the event loop turns: signal handlers run and workers' results arrive.
    await new Promise((resolve) => setImmediate(resolve));
    if (interruptedBy() !== null) return false;
    if (def.kind === "delegated") hooks.beforeDelegated?.(def);
    const r = runCheck(def, { seed, profile, replay: replay && { seed: replay.seed, path: replay.path }, selected });
    if (interruptedBy() !== null) return false;
    record(r);
    return true;
  };
  for (const def of defs) if (!inWorker.has(def.id) && !(await runInline(def))) break;
  const settled = Promise.allSettled(workers);
  while (workers.length > 0 && interruptedBy() === null && !(await Promise.race([settled.then(() => true), Bun.sleep(100).then(() => false)]))) { /* wait */ }
  if (interruptedBy() === null) {
    await settled;
    // What a failed worker did not report runs here, in order.
    if (workerInterrupt === null) for (const [i, def] of defs.entries()) if (slots[i] === undefined && !(await runInline(def))) break;
  }
  stopped = true;
  for (const w of active) w.stop();
  return {
    results: slots.filter((r): r is CheckResult => r !== undefined),
    backends: mergeBackendInfo(plan.catalogue.backends(), workerBackends),
    interrupt: interruptedBy() ?? workerInterrupt,
  };
}
