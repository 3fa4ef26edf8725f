/**
 * `bun test` entry: one test per check of the catalogue. A check that is not `pass` or `skip`
 * fails its test with the check's message and replay command. A check that cannot run here (a
 * kernel backend that is not available) is registered with `test.skip`, so `bun test` and its
 * JUnit output count it as skipped, never as passed; its result still goes into the report.
 */
import { test } from "bun:test";
import { collected, envOptions } from "../harness/collect.ts";
import { runCheck } from "../harness/run.ts";
import type { CheckDef } from "../harness/check.ts";
import { buildCatalogue, matchesFilter } from "./catalogue.ts";
import { selectShard } from "../harness/shard.ts";
import { interruptedBy } from "../harness/interrupt.ts";
import { backendSkipReason } from "./c5/checks.ts";
import { reportBackends } from "./preload.ts";

const opts = envOptions();
const cat = buildCatalogue({ fixtureDirs: opts.fixtureDirs });
reportBackends.get = () => cat.backends();
const matching = cat.checks.filter((c) => matchesFilter(c, opts.filters));
// NLC_SHARD=i/n: this process runs shard i of n (the same partition in every shard process).
const defs = opts.shard === undefined ? matching : selectShard(matching, opts.shard);
const selected = new Set(defs.map((d) => d.id));

/** Why a check will be skipped, known before it runs; null when it runs. */
function skipReason(def: CheckDef): string | null {
  if (def.kind === "skipped") return def.reason;
  if (def.kind === "delegated" && def.subject.backend !== undefined) return backendSkipReason(def.subject.backend);
  return null;
}

for (const def of defs) {
  const reason = skipReason(def);
  if (reason !== null) {
    collected.push(runCheck(def, { seed: opts.seed, profile: opts.profile, selected }));
    test.skip(`${def.id} (skip: ${reason})`, () => {});
    continue;
  }
  test(def.id, () => {
    // After an interrupt (a child ended by SIGINT/SIGTERM) nothing more runs, and the check in
    // flight is not recorded: its result is the interruption's. The report is then written as partial.
    if (interruptedBy() !== null) throw new Error(`${def.id}: not run: the run was interrupted by ${interruptedBy()}`);
    const r = runCheck(def, { seed: opts.seed, profile: opts.profile, selected });
    if (interruptedBy() !== null) throw new Error(`${def.id}: interrupted by ${interruptedBy()}`);
    collected.push(r);
    if (r.status !== "pass" && r.status !== "skip") {
      throw new Error(`${r.id}: ${r.status}: ${r.message ?? ""}\n  replay: ${r.replay}`);
    }
  }, 600_000);
}
