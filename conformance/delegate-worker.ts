/**
 * A worker thread of `npm run conformance`, one per lane (conformance/parallel.ts): it runs job
 * after job — a batch of delegated checks (C5's kernel children, C9's cross-check process, a
 * crash-isolation check), then shares of the in-process checks — beside the main thread, so every
 * core works and a child's waiting (the hang-isolation timeout) overlaps other checks. Its
 * catalogue is built once, for the first job, from the settings the job carries (the plan's).
 * Each check's seed comes from the run seed and its id, so the results are those of a serial run.
 */
import { adoptHandovers, buildCatalogue, type Catalogue } from "./catalogue.ts";
import { interruptedBy } from "../harness/interrupt.ts";
import { runCheck } from "../harness/run.ts";
import type { CheckDef } from "../harness/check.ts";
import type { WorkerJob, WorkerMessage } from "./parallel.ts";
import { adoptEnvironment } from "../environment.ts";

declare const self: Worker;

let catalogue: { cat: Catalogue; byId: Map<string, CheckDef> } | undefined;

function catalogueFor(job: WorkerJob): { cat: Catalogue; byId: Map<string, CheckDef> } {
  if (catalogue !== undefined) return catalogue;
  // the main thread's start-up record, before anything here reads it; nothing writes it afterwards
  adoptEnvironment(job.environment);
  adoptHandovers(job.handovers);
  const cat = buildCatalogue(job.settings);
  catalogue = { cat, byId: new Map(cat.checks.map((c) => [c.id, c])) };
  return catalogue;
}

self.onmessage = (ev: MessageEvent<WorkerJob>) => {
  const job = ev.data;
  const post = (m: WorkerMessage) => self.postMessage(m);
  try {
    const { cat, byId } = catalogueFor(job);
    const selected = new Set(job.selected);
    for (const id of job.ids) {
      const def = byId.get(id);
      if (def === undefined) throw new Error(`no check ${id} in the worker's catalogue`);
      const r = runCheck(def, { seed: job.seed, profile: job.profile, selected });
      // A child ended by SIGINT/SIGTERM: the check in flight is the interruption's, not recorded.
      if (interruptedBy() !== null) break;
      post({ kind: "result", result: r });
    }
    post({ kind: "done", backends: cat.backends(), interrupt: interruptedBy() });
  } catch (e) {
    post({ kind: "failed", message: e instanceof Error ? e.stack ?? e.message : String(e) });
  }
};
