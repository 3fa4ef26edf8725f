/**
 * What a worker thread of the parallel runner spends building the checks of its job (tinybench):
 * the whole catalogue, as every worker built it before, against only the generators that made the
 * job's checks (conformance/catalogue.ts `generatorsOf`), for the jobs a run hands out — a kernel
 * backend's batch, the cross-check's batch, a share of in-process checks. Module loading is the
 * same either way and not timed.
 *   npx bun bench/worker-catalogue.ts [--time MS]
 */
import { Bench } from "tinybench";
import { buildCatalogue, type GeneratorKey } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";
import { batchOf } from "../conformance/parallel.ts";

const argv = process.argv.slice(2);
const at = argv.indexOf("--time");
const time = at >= 0 ? Number(argv[at + 1]) : 3000;

const settings = catalogueSettings({ fixtureDirs: [], names: ENV_NAMES });
const full = buildCatalogue(settings);
/** A job per batch of delegated checks, and one share of the in-process checks (the last tenth). */
const jobs = new Map<string, GeneratorKey[]>();
const byBatch = new Map<string, string[]>();
for (const d of full.checks) if (d.kind === "delegated") byBatch.set(batchOf(d), [...(byBatch.get(batchOf(d)) ?? []), d.id]);
for (const [batch, ids] of byBatch) jobs.set(`batch "${batch}" (${ids.length} checks)`, full.generatorsOf(ids));
const inProcess = full.checks.filter((d) => d.kind !== "delegated");
const share = inProcess.slice(Math.floor(inProcess.length * 0.9)).map((d) => d.id);
jobs.set(`a share of ${share.length} in-process checks`, full.generatorsOf(share));

const b = new Bench({ time, warmupTime: 500 });
b.add("whole catalogue", () => buildCatalogue(settings));
for (const [name, keys] of jobs) b.add(`${name}: ${keys.join(", ")}`, () => buildCatalogue(settings, keys));
await b.run();
const mean = (i: number) => {
  const r = b.tasks[i]!.result;
  if (r.state !== "completed") throw new Error(`benchmark: ${r.state}`);
  return r.latency.mean;
};
const whole = mean(0);
console.log(`whole catalogue (${full.checks.length} checks): ${whole.toFixed(1)} ms`);
b.tasks.slice(1).forEach((t, i) => console.log(`${t.name}: ${mean(i + 1).toFixed(1)} ms (${(mean(i + 1) / whole).toFixed(2)} of the whole)`));
