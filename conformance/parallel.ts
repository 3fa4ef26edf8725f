/**
 * Running the delegated checks beside the in-process ones (`npm run conformance` only; `bun test`
 * and replays run serially). Delegated checks of one class share a batch (one kernel child, one
 * cross-check run), so each class with delegated checks goes to one worker thread, in catalogue
 * order; a check may name its own batch (the crash-isolation checks do: their children mostly wait,
 * the hang one for its whole timeout, and so overlap the kernel checks instead of following them).
 * NLC_SERIAL=1 runs everything in the main thread.
 */
import type { CheckDef, CheckResult, Profile } from "../harness/check.ts";
import type { BackendInfo } from "../harness/report.ts";
import type { InterruptSignal } from "../oracle/child-signals.ts";

export interface WorkerJob {
  ids: string[];
  seed: number;
  profile: Profile;
  fixtureDirs: string[];
  selected: string[];
  /** The main thread's answer to "can C9 run here" (conformance/c9/checks.ts), so a worker need not probe again. */
  c9SkipReason: string | null;
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

/** The batches (a class, or a check's own `batch`) whose delegated checks go to a worker, with their ids in catalogue order. */
export function delegatedBatches(defs: readonly CheckDef[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const d of defs) {
    if (d.kind !== "delegated") continue;
    const key = d.batch ?? d.class;
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

/** A backend the thread that lists it never tried: its checks ran in a worker, or nowhere. */
function undecided(b: BackendInfo): boolean {
  return !b.available && /^not (probed|run)\b/.test(b.reason ?? "");
}

/**
 * The report's backends: the main thread's list, where a worker tried a backend (it ran C5 or a
 * `py:` backend's checks) its findings instead of "not probed" / "not run".
 */
export function mergeBackendInfo(main: readonly BackendInfo[], fromWorkers: readonly BackendInfo[][]): BackendInfo[] {
  return main.map((b) => {
    if (!undecided(b)) return b;
    for (const list of fromWorkers) {
      const w = list.find((x) => x.name === b.name);
      if (w !== undefined && !undecided(w)) return w;
    }
    return b;
  });
}
