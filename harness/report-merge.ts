/**
 * `merge A B ... --out X`: the reports of the shards of one run (or of runs over disjoint
 * selections) as one report. The parts must come from the same version, revision, seed and
 * profile, hold no check twice, and, when they are shards, be every shard of one count.
 */
import type { BackendInfo } from "../ffi/backends.ts";
import { summarize, type Report } from "./report.ts";

/** A set of parts that cannot be merged; the message names the files. */
export class MergeError extends Error {}

interface Part {
  path: string;
  report: Report;
}

const SAME = ["version", "revision", "seed", "profile", "filter"] as const;

export function mergeReports(parts: readonly Part[]): Report {
  if (parts.length === 0) throw new MergeError("nothing to merge");
  const partial = parts.find((p) => p.report.partial === true);
  if (partial !== undefined) throw new MergeError(`${partial.path} is the partial report of an interrupted run: rerun that shard`);
  const first = parts[0]!;
  for (const p of parts.slice(1)) {
    for (const f of SAME) {
      const a = first.report.run[f] ?? null, b = p.report.run[f] ?? null;
      if (a !== b) throw new MergeError(`${p.path}: run.${f} is ${JSON.stringify(b)}, but ${first.path} has ${JSON.stringify(a)}`);
    }
  }
  const shards = parts.map((p) => p.report.run.shard);
  if (shards.some((s) => s !== undefined)) {
    const count = shards[0]?.count;
    const seen = new Map<number, string>();
    parts.forEach((p, i) => {
      const s = shards[i];
      if (s === undefined || s.count !== count) {
        throw new MergeError(`${p.path}: ${s === undefined ? "not a shard" : `shard ${s.index}/${s.count}`}, but ${first.path} is a shard of ${count}`);
      }
      const other = seen.get(s.index);
      if (other !== undefined) throw new MergeError(`${p.path} and ${other} are both shard ${s.index}/${count}`);
      seen.set(s.index, p.path);
    });
    const missing = Array.from({ length: count! }, (_, i) => i + 1).filter((i) => !seen.has(i));
    if (missing.length > 0) throw new MergeError(`shard${missing.length > 1 ? "s" : ""} ${missing.join(", ")} of ${count} missing: the merged report would look complete without them`);
  }
  const owner = new Map<string, string>();
  for (const p of parts) {
    for (const c of p.report.checks) {
      const prev = owner.get(c.id);
      if (prev !== undefined) throw new MergeError(`check ${c.id} is in both ${prev} and ${p.path}`);
      owner.set(c.id, p.path);
    }
  }
  const checks = parts.flatMap((p) => p.report.checks).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const runs = parts.map((p) => p.report.run);
  const { shard: _shard, planned: _planned, ...run } = first.report.run;
  const planned = runs.every((r) => r.planned !== undefined) ? runs.reduce((a, r) => a + r.planned!, 0) : undefined;
  return {
    format: "nlc-report/1",
    run: {
      ...run,
      started: runs.map((r) => r.started).sort()[0]!,
      ended: runs.map((r) => r.ended).sort().at(-1)!,
      backends: mergeBackends(runs.map((r) => r.backends)),
      ...(planned !== undefined ? { planned } : {}),
    },
    summary: summarize(checks),
    checks,
  };
}

/** One entry per backend: available when any part had it available (that part ran its checks). */
function mergeBackends(lists: readonly BackendInfo[][]): BackendInfo[] {
  const out = new Map<string, BackendInfo>();
  for (const list of lists) {
    for (const b of list) {
      const prev = out.get(b.name);
      if (prev === undefined || (!prev.available && b.available)) out.set(b.name, b);
    }
  }
  return [...out.values()];
}
