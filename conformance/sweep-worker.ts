/**
 * A worker thread of `npm run conformance -- sweep`: builds the selected checks once, from the
 * settings its first message carries (the plan's) and only the catalogue's generators that made
 * them, then runs them at each seed the main thread hands it, so a seed costs its checks only,
 * not a process start. Results go back one seed at a time.
 */
import { adoptHandovers, buildCatalogue } from "./catalogue.ts";
import { sweepSeed } from "../harness/sweep.ts";
import type { SweepWorkerInit, SweepWorkerMessage } from "./sweep.ts";
import { adoptEnvironment } from "../environment.ts";

declare const self: Worker;

let run: ((seed: number) => void) | undefined;

self.onmessage = (ev: MessageEvent<SweepWorkerInit | { kind: "seed"; seed: number }>) => {
  const post = (m: SweepWorkerMessage) => self.postMessage(m);
  const job = ev.data;
  try {
    if (job.kind === "init") {
      // the main thread's start-up record, before anything here reads it; nothing writes it afterwards
      adoptEnvironment(job.environment);
      adoptHandovers(job.handovers);
      const ids = new Set(job.ids);
      const defs = buildCatalogue(job.settings, job.generators).checks.filter((c) => ids.has(c.id));
      const selected = new Set(defs.map((d) => d.id));
      // every generated case goes into the seed's digest: the evidence that the seeds ran different cases
      run = (seed) => post({ kind: "seed", seed, ...sweepSeed(defs, seed, job.profile, selected) });
      post({ kind: "ready" });
    } else run!(job.seed);
  } catch (e) {
    post({ kind: "failed", message: e instanceof Error ? e.stack ?? e.message : String(e) });
  }
};
