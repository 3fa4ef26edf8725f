/**
 * A worker thread of `npm run conformance`, one per lane (conformance/parallel.ts): it runs job
 * after job — a batch of delegated checks (C5's kernel children, C9's cross-check process, a
 * crash-isolation check), then shares of the in-process checks — beside the main thread, so every
 * core works and a child's waiting (the hang-isolation timeout) overlaps other checks. It builds
 * the checks of a job from the settings the job carries (the plan's), and only the catalogue's
 * generators that made them (`WorkerJob.generators`), each once.
 * Each check's seed comes from the run seed and its id, so the results are those of a serial run.
 */
import { adoptHandovers, buildCatalogue, type Catalogue, type GeneratorKey } from "./catalogue.ts";
import { interruptedBy } from "../harness/interrupt.ts";
import { runCheck } from "../harness/run.ts";
import type { CheckDef } from "../harness/check.ts";
import type { WorkerJob, WorkerMessage } from "./parallel.ts";
import { adoptEnvironment } from "../environment.ts";

declare const self: Worker;

/** What this worker has built: the checks by id, the generators they came from, the report's backends. */
let built: { byId: Map<string, CheckDef>; generators: Set<GeneratorKey>; backends: Catalogue["backends"] } | undefined;

function checksFor(job: WorkerJob): NonNullable<typeof built> {
  if (built === undefined) {
    // the main thread's start-up record, before anything here reads it; nothing writes it afterwards
    adoptEnvironment(job.environment);
    adoptHandovers(job.handovers);
  }
  const missing = job.generators.filter((g) => built?.generators.has(g) !== true);
  if (missing.length === 0) return built!;
  const cat = buildCatalogue(job.settings, missing);
  built ??= { byId: new Map(), generators: new Set(), backends: cat.backends };
  for (const c of cat.checks) built.byId.set(c.id, c);
  for (const g of missing) built.generators.add(g);
  return built;
}

self.onmessage = (ev: MessageEvent<WorkerJob>) => {
  const job = ev.data;
  const post = (m: WorkerMessage) => self.postMessage(m);
  try {
    const { byId, backends } = checksFor(job);
    const selected = new Set(job.selected);
    for (const id of job.ids) {
      const def = byId.get(id);
      if (def === undefined) throw new Error(`no check ${id} in the worker's catalogue`);
      const r = runCheck(def, { seed: job.seed, profile: job.profile, selected });
      // A child ended by SIGINT/SIGTERM: the check in flight is the interruption's, not recorded.
      if (interruptedBy() !== null) break;
      post({ kind: "result", result: r });
    }
    post({ kind: "done", backends: backends(), interrupt: interruptedBy() });
  } catch (e) {
    post({ kind: "failed", message: e instanceof Error ? e.stack ?? e.message : String(e) });
  }
};
