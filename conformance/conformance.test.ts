/**
 * `bun test` entry: one test per check of the catalogue. A check that is not `pass` or `skip`
 * fails its test with the check's message and replay command.
 */
import { test } from "bun:test";
import { collected, envOptions } from "../harness/collect.ts";
import { runCheck } from "../harness/run.ts";
import { buildCatalogue, matchesFilter } from "./catalogue.ts";
import { reportBackends } from "./preload.ts";

const opts = envOptions();
const cat = buildCatalogue({ fixtureDirs: opts.fixtureDirs });
reportBackends.get = () => cat.backends();
const defs = cat.checks.filter((c) => matchesFilter(c, opts.filters));
const selected = new Set(defs.map((d) => d.id));

for (const def of defs) {
  test(def.id, () => {
    const r = runCheck(def, { seed: opts.seed, profile: opts.profile, selected });
    collected.push(r);
    if (r.status !== "pass" && r.status !== "skip") {
      throw new Error(`${r.id}: ${r.status}: ${r.message ?? ""}\n  replay: ${r.replay}`);
    }
  }, 600_000);
}
