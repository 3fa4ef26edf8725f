/**
 * The one runner of a plan (conformance/plan.ts), for `npm run conformance` and `bun test` alike
 * (docs/spec/conformance.md#one-scheduler): the delegated checks run beside the in-process ones.
 * It schedules by what a check declares, never by its class or backend: a delegated check names
 * the child it needs (`needs.child`), and the checks naming one child share a batch, which goes to
 * one lane, in catalogue order, at most LANES batches at once (a check folder gives checks that
 * mostly wait, such as the crash-isolation ones, a child of their own, so they overlap the others
 * instead of following them); work that several batches need first (`needs.before`) is done once,
 * here. A lane keeps one worker thread; when its batches are done and a core is free it
 * takes shares of the in-process checks (InlineWork), which the main thread runs from the front.
 * A run with a single lane of work (one batch and nothing else, e.g. one kernel backend's checks)
 * and replays run in the main thread: a worker would only add its start-up. NLC_SERIAL=1 runs
 * everything in the main thread.
 */
import type { CheckDef, CheckResult, Profile } from "../harness/check.ts";
import { gateMinPower } from "../harness/report-power.ts";
import type { BackendInfo } from "../harness/report.ts";
import type { InterruptSignal } from "../oracle/child-signals.ts";
import { interruptedBy } from "../harness/interrupt.ts";
import { runCheck } from "../harness/run.ts";
import type { RunPlan } from "./plan.ts";
import type { CatalogueSettings } from "./catalogue-settings.ts";
import { availableParallelism } from "node:os";
import { takeHandovers, type GeneratorKey } from "./catalogue.ts";
import { estimates, loadTimes } from "../harness/shard.ts";
import { environment, type Environment } from "../environment.ts";

export interface WorkerJob {
  ids: string[];
  seed: number;
  profile: Profile;
  /** What the worker builds the checks from: the plan's settings (catalogue-settings.ts), as data. */
  settings: CatalogueSettings;
  /** The catalogue's generators that made the checks `ids` (catalogue.ts): the worker builds those alone. */
  generators: GeneratorKey[];
  selected: string[];
  /** What the main thread learnt (the kernel backends' probe, catalogue.ts takeHandovers), so a worker does not learn it again. */
  handovers: unknown[];
  /**
   * The main thread's environment record as it was read at start-up (never written after): the
   * worker adopts it before its first check, for what its children inherit (environment.ts).
   */
  environment: Environment;
}

export type WorkerMessage =
  | { kind: "result"; result: CheckResult }
  | { kind: "done"; backends: BackendInfo[]; interrupt: InterruptSignal | null }
  | { kind: "failed"; message: string };

interface WorkerOutcome {
  backends: BackendInfo[];
  interrupt: InterruptSignal | null;
}

/** The batch of a delegated check: the child it declares it needs (`needs.child`). */
export function batchOf(d: CheckDef): string {
  if (d.kind !== "delegated") throw new Error(`${d.id}: only a delegated check has a batch`);
  return d.needs.child;
}

/** The distinct `needs.before` of the checks to run that more than one of the batches needs, in catalogue order. */
function beforeBatches(defs: readonly CheckDef[], batches: ReadonlyMap<string, readonly string[]>): (() => void)[] {
  const byBefore = new Map<() => void, Set<string>>();
  for (const d of defs) {
    if (d.kind !== "delegated" || d.needs.before === undefined || !batches.has(d.needs.child)) continue;
    const set = byBefore.get(d.needs.before) ?? new Set<string>();
    set.add(d.needs.child);
    byBefore.set(d.needs.before, set);
  }
  return [...byBefore].filter(([, children]) => children.size > 1).map(([f]) => f);
}

/**
 * How many batches run at once, each in its own worker thread: one per core and one more, since
 * batches mostly wait on their child processes (kernel children, Python hosts, the hang check).
 */
const LANES = Math.max(3, availableParallelism() + 1);

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

function parallelEnabled(env: Environment = environment()): boolean {
  return env.NLC_SERIAL !== "1";
}

/**
 * A lane's worker thread: it runs job after job (a batch, then shares of the in-process checks),
 * building its catalogue once; `onResult` sees each result as it arrives.
 */
class LaneWorker {
  private readonly worker = new Worker(new URL("./delegate-worker.ts", import.meta.url).href);
  private pending: { resolve(o: WorkerOutcome): void; reject(e: Error): void } | null = null;
  private dead: Error | null = null;

  constructor(onResult: (r: CheckResult) => void) {
    const fail = (e: Error) => {
      this.dead = e;
      this.worker.terminate();
      this.pending?.reject(e);
      this.pending = null;
    };
    this.worker.onmessage = (ev: MessageEvent<WorkerMessage>) => {
      const m = ev.data;
      if (m.kind === "result") onResult(m.result);
      else if (m.kind === "done") {
        this.pending?.resolve({ backends: m.backends, interrupt: m.interrupt });
        this.pending = null;
      } else fail(new Error(`a check worker failed: ${m.message}`));
    };
    this.worker.onerror = (e) => fail(new Error(`a check worker failed: ${e.message}`));
  }

  /** Runs one job; rejects when the worker failed (its unreported checks are then the caller's). */
  run(job: WorkerJob): Promise<WorkerOutcome> {
    if (this.dead !== null) return Promise.reject(this.dead);
    return new Promise<WorkerOutcome>((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(job);
    });
  }

  stop(): void {
    this.worker.terminate();
  }
}

/**
 * The in-process checks not yet taken, in catalogue order: the main thread runs them one at a time
 * from the front, and a lane whose batches are done takes a share from the back (guided
 * self-scheduling by the estimated times of conformance/data/check-times.json: half of an equal
 * split of what is left among the threads that work on it, at least one check), so all threads
 * end together whatever the mix of checks.
 */
export class InlineWork {
  private lo = 0;
  private hi: number;
  private readonly est: number[];

  constructor(private readonly defs: readonly CheckDef[], estimates: ReadonlyMap<string, number>) {
    this.hi = defs.length;
    this.est = defs.map((d) => estimates.get(d.id) ?? 0);
  }

  /** The next check from the front, or undefined when every check is taken. */
  front(): CheckDef | undefined {
    return this.lo < this.hi ? this.defs[this.lo++] : undefined;
  }

  /** The estimated milliseconds of what is not yet taken. */
  remainingMs(): number {
    let ms = 0;
    for (let i = this.lo; i < this.hi; i++) ms += this.est[i]!;
    return ms;
  }

  /** A share from the back for one of `threads` threads, in catalogue order; none when less than `minMs` is left. */
  share(threads: number, minMs: number): CheckDef[] {
    const left = this.remainingMs();
    if (this.lo >= this.hi || left < minMs) return [];
    const target = left / (2 * Math.max(1, threads));
    let ms = 0, from = this.hi;
    while (from > this.lo && (from === this.hi || ms < target)) ms += this.est[--from]!;
    const out = this.defs.slice(from, this.hi);
    this.hi = from;
    return out;
  }
}

/**
 * What must be left of the in-process checks (estimated) for a lane to take a share: below it a
 * worker's start (its module graph and catalogue, about 0.3 s) or one more thread on a busy
 * machine does not pay. NLC_SHARE_MIN_MS overrides (0: share whatever is left).
 */
function shareMinMs(env: Environment = environment()): number {
  const set = Number(env.NLC_SHARE_MIN_MS);
  return env.NLC_SHARE_MIN_MS !== undefined && env.NLC_SHARE_MIN_MS !== "" && Number.isFinite(set) && set >= 0 ? set : 1000;
}

/** Lanes that only share in-process checks (no batch to run): one per core besides the main thread's. */
function sharingLanes(cores = availableParallelism()): number {
  return Math.max(0, cores - 1);
}

/**
 * The report's backends: the main thread's list, where a worker probed a backend (it ran that
 * backend's checks) its findings instead of "not probed".
 */
export function mergeBackendInfo(main: readonly BackendInfo[], fromWorkers: readonly BackendInfo[][]): BackendInfo[] {
  // "not probed" or "not run": this thread did not run the backend's checks.
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

/**
 * Whether worker threads pay, not counting a replay: more than one lane of work (in-process checks,
 * batches), or in-process checks alone estimated at `inlineMs`, enough to share among the cores.
 */
export function workersPay(defs: readonly CheckDef[], batches: ReadonlyMap<string, string[]>, inlineMs = 0, cores = availableParallelism()): boolean {
  const inline = defs.some((d) => d.kind === "property" || d.kind === "single");
  return (inline ? 1 : 0) + batches.size > 1 || (inline && cores > 1 && inlineMs >= 2 * shareMinMs());
}

interface RunHooks {
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
  /** What went wrong without changing a verdict, one line each (a worker lane that failed): the report's `run.warnings`. */
  warnings: string[];
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
  const est = estimates(defs, loadTimes());
  const inProcess = defs.filter((d) => d.kind !== "delegated");
  const parallel = replay === undefined && parallelEnabled() && workersPay(defs, all, inProcess.reduce((ms, d) => ms + est.get(d.id)!, 0));
  const batches = parallel ? all : new Map<string, string[]>();
  // With workers every delegated check is in a batch; without, everything runs here.
  const work = new InlineWork(parallel ? inProcess : defs, est);
  // Work that more than one batch needs done first (building and probing the native kernel
  // backends): done once, here, and its result handed to every worker.
  for (const before of beforeBatches(defs, batches)) before();
  // LANES lanes (or, with no batch, one per core besides this thread), each with one worker: it
  // takes the next batch, in catalogue order, while there is one, then shares of the in-process
  // checks while enough of them is left.
  const queue = [...batches.values()];
  const active = new Set<LaneWorker>();
  const workerBackends: BackendInfo[][] = [];
  let workerInterrupt: InterruptSignal | null = null;
  const warnings: string[] = [];
  let sharing = 1; // the threads working on the in-process checks: this one, and the lanes that took a share
  let batchesRunning = 0;
  const cores = availableParallelism();
  const minShare = shareMinMs();
  const going = () => !stopped && interruptedBy() === null && workerInterrupt === null;
  const lane = async (): Promise<void> => {
    let w: LaneWorker | undefined;
    const job = (ids: string[]): WorkerJob => ({ ids, seed, profile, settings: plan.settings,
      generators: plan.catalogue.generatorsOf(ids), selected: [...selected], handovers: takeHandovers(),
      environment: environment() });
    const runJob = async (ids: string[]): Promise<boolean> => {
      if (w === undefined) active.add(w = new LaneWorker(record));
      try {
        const o = await w.run(job(ids));
        workerBackends.push(o.backends);
        workerInterrupt ??= o.interrupt;
        return true;
      } catch (e) {
        // one line: the failure's first line, and where its unreported checks go
        const left = ids.filter((id) => slots[position.get(id)!] === undefined).length;
        warnings.push(`${(e instanceof Error ? e.message : String(e)).split("\n")[0]}; its ${left} unreported of ${ids.length} checks run on the main thread`);
        console.error(`conformance: ${warnings.at(-1)}`);
        active.delete(w);
        w = undefined;
        return false;
      }
    };
    for (let ids = queue.shift(); ids !== undefined && going(); ids = queue.shift()) {
      batchesRunning++;
      await runJob(ids);
      batchesRunning--;
    }
    // A share only while a core is free: a batch's children (kernels, Python) and the threads
    // already on in-process checks each keep one busy; more threads than cores only add their start-up.
    while (going()) {
      if (sharing + batchesRunning >= cores) {
        if (work.remainingMs() < minShare) break;
        await Bun.sleep(50);
        continue;
      }
      const share = work.share(sharing + 1, minShare);
      if (share.length === 0) break;
      sharing++;
      const ok = await runJob(share.map((d) => d.id));
      sharing--;
      if (!ok) break;
    }
  };
  // Without a batch, `parallel` means the in-process checks alone are worth sharing (workersPay).
  const workers = Array.from({ length: !parallel ? 0 : queue.length > 0 ? LANES : sharingLanes() }, lane);
  const runInline = async (def: CheckDef) => {
    // Between checks the event loop turns: signal handlers run and workers' results arrive.
    await new Promise((resolve) => setImmediate(resolve));
    if (interruptedBy() !== null) return false;
    if (def.kind === "delegated") hooks.beforeDelegated?.(def);
    const r = runCheck(def, { seed, profile, replay: replay && { seed: replay.seed, path: replay.path, ...(replay.dump !== undefined ? { dump: replay.dump } : {}) }, selected });
    if (interruptedBy() !== null) return false;
    record(r);
    return true;
  };
  for (let def = work.front(); def !== undefined; def = work.front()) if (!(await runInline(def))) break;
  sharing--; // this thread is done with them
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
    warnings,
  };
}
