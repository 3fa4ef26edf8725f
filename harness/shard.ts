/**
 * Sharding (`--shard i/n`, NLC_SHARD=i/n): every shard process computes the same partition of the
 * selected checks, so the shards together run each check exactly once. Checks are placed longest
 * first on the least-loaded shard (ties: lower index), with times from the committed table of
 * measured durations (conformance/data/check-times.json, refreshed by the `timings` command) and,
 * for a check the table does not know, the mean of its class there (else a flat guess).
 * Delegated checks of one class and backend share a batch (one child process, one cross-check
 * run), so they form one unit and land on one shard.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import type { CheckDef, CheckResult } from "./check.ts";

export const CHECK_TIMES = join(ROOT, "conformance", "data", "check-times.json");
/** A check unknown to the table and to its class (milliseconds). */
const FLAT_GUESS_MS = 20;

export interface Shard {
  /** 1-based. */
  index: number;
  count: number;
}

/** "i/n" with 1 <= i <= n; throws naming the text otherwise. */
export function parseShard(text: string): Shard {
  const m = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = m ? Number(m[1]) : NaN, count = m ? Number(m[2]) : NaN;
  if (!(count >= 1 && index >= 1 && index <= count)) throw new Error(`'${text}': expected i/n with 1 <= i <= n, e.g. 2/4`);
  return { index, count };
}

interface TimingTable {
  format: "nlc-check-times/1";
  profile: string;
  /** Milliseconds per check id. */
  ms: Record<string, number>;
}

/** The committed table; an empty one when it is missing (every estimate is then the flat guess). */
export function loadTimes(path = CHECK_TIMES): TimingTable {
  if (!existsSync(path)) return { format: "nlc-check-times/1", profile: "default", ms: {} };
  const t = JSON.parse(readFileSync(path, "utf8")) as TimingTable;
  if (t.format !== "nlc-check-times/1" || typeof t.ms !== "object") throw new Error(`${path}: not an nlc-check-times/1 table`);
  return t;
}

/** A timing table from a report's measured durations. */
export function timesFromReport(checks: readonly CheckResult[], profile: string): TimingTable {
  const ms: Record<string, number> = {};
  for (const c of [...checks].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) ms[c.id] = Math.max(1, Math.round(c.ms));
  return { format: "nlc-check-times/1", profile, ms };
}

/**
 * `update`'s times over `base`'s (a filtered run refreshes its own checks, the rest keep theirs);
 * ids sorted, so the file diffs line by line. The two are of one profile (the caller checks).
 */
export function mergeTimes(base: TimingTable, update: TimingTable): TimingTable {
  const all = { ...base.ms, ...update.ms };
  const ms: Record<string, number> = {};
  for (const id of Object.keys(all).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) ms[id] = all[id]!;
  return { format: "nlc-check-times/1", profile: update.profile, ms };
}

/** The table as committed: one check per line, so a refresh diffs line by line. */
export function formatTimes(t: TimingTable): string {
  const rows = Object.entries(t.ms).map(([id, ms]) => `    ${JSON.stringify(id)}: ${ms}`);
  return `{\n  "format": "nlc-check-times/1",\n  "profile": ${JSON.stringify(t.profile)},\n  "ms": {\n${rows.join(",\n")}\n  }\n}\n`;
}

function unitOf(def: CheckDef): string {
  return def.kind === "delegated" ? `batch ${def.class} ${def.subject.backend ?? ""}` : def.id;
}

/** The estimated time of each check: measured, else its class's mean, else the flat guess. */
export function estimates(defs: readonly CheckDef[], table: TimingTable): Map<string, number> {
  const byClass = new Map<string, { sum: number; n: number }>();
  for (const [id, ms] of Object.entries(table.ms)) {
    const cls = id.split("/")[0]!;
    const s = byClass.get(cls) ?? { sum: 0, n: 0 };
    s.sum += ms;
    s.n++;
    byClass.set(cls, s);
  }
  const out = new Map<string, number>();
  for (const d of defs) {
    const cls = byClass.get(d.class);
    out.set(d.id, table.ms[d.id] ?? (cls ? cls.sum / cls.n : FLAT_GUESS_MS));
  }
  return out;
}

/** Shard index (1-based) of every check id: deterministic for the same checks and table. */
export function assignShards(defs: readonly CheckDef[], count: number, table: TimingTable): Map<string, number> {
  const est = estimates(defs, table);
  const units = new Map<string, { ids: string[]; ms: number }>();
  for (const d of defs) {
    const key = unitOf(d);
    const u = units.get(key) ?? { ids: [], ms: 0 };
    u.ids.push(d.id);
    u.ms += est.get(d.id)!;
    units.set(key, u);
  }
  const order = [...units.entries()].sort(([ka, a], [kb, b]) => b.ms - a.ms || (ka < kb ? -1 : ka > kb ? 1 : 0));
  const load = Array.from({ length: count }, () => 0);
  const out = new Map<string, number>();
  for (const [, u] of order) {
    let best = 0;
    for (let s = 1; s < count; s++) if (load[s]! < load[best]!) best = s;
    load[best]! += u.ms;
    for (const id of u.ids) out.set(id, best + 1);
  }
  return out;
}

/** The checks of one shard, in their original order. */
export function selectShard<T extends CheckDef>(defs: readonly T[], shard: Shard, table = loadTimes()): T[] {
  const at = assignShards(defs, shard.count, table);
  return defs.filter((d) => at.get(d.id) === shard.index);
}
