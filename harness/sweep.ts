/**
 * A sweep (docs/spec/conformance.md#sweeps): the selected checks run at many run seeds, and per
 * check the count of each verdict, with every non-pass one's seed and replay line. Sweeps over
 * disjoint seed sets (shards of the seed list, other machines) merge into one.
 * What is here knows nothing of particular checks: the runner (conformance/sweep.ts) feeds it results.
 */
import { readFileSync, renameSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { isUndeclared, type CheckClass, type CheckDef, type CheckResult, type Profile, type Status } from "./check.ts";
import { runCheck } from "./run.ts";
import type { Shard } from "./shard.ts";
import { CaseDigester, type CaseDigest } from "./case-digest.ts";

export const SWEEP_FORMAT = "nlc-sweep/1";

/** The statuses that make a verdict false on a correct project (skip is not one: it carries its reason). */
export const NON_PASS: readonly Status[] = ["fail", "vacuous", "error"];

/** At most this many non-pass verdicts are kept per check (the counts are always complete). */
const KEPT_PER_CHECK = 20;

interface SweepVerdict {
  seed: number;
  status: Status;
  message: string;
  replay: string;
}

interface SweepCheck {
  id: string;
  class: CheckClass;
  /** How many seeds ran this check. */
  seeds: number;
  counts: Record<Status, number>;
  /** The non-pass verdicts by seed (the first KEPT_PER_CHECK). */
  nonpass: SweepVerdict[];
  /** Total run time over the seeds, ms. */
  ms: number;
}

interface SweepRun {
  version: string;
  revision: string | null;
  profile: string;
  filter: string | null;
  /** The seeds this sweep (or merged sweeps) ran, ascending. */
  seeds: number[];
  started: string;
  ended: string;
  /** Set on a sweep over one shard of the seed list. */
  shard?: Shard;
  /** Worker threads used. */
  jobs?: number;
  /**
   * Evidence that the seeds ran different cases (docs/spec/conformance.md#sweep-digests): per seed,
   * a digest of every case the in-process property checks generated at it, and how many.
   */
  case_digests?: Record<string, CaseDigest>;
}


export interface Sweep {
  format: typeof SWEEP_FORMAT;
  run: SweepRun;
  checks: SweepCheck[];
}

function emptyCounts(): Record<Status, number> {
  return { pass: 0, fail: 0, vacuous: 0, error: 0, skip: 0 };
}

/**
 * "A..B" (inclusive), "A,B,C", or a mix ("1..10,17"); positive or zero integers. Throws naming
 * the text otherwise.
 */
export function parseSeeds(text: string): number[] {
  const out = new Set<number>();
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const range = /^(\d+)\.\.(\d+)$/.exec(part);
    if (range !== null) {
      const a = Number(range[1]), b = Number(range[2]);
      if (b < a) throw new Error(`'${part}': the range ends before it starts`);
      if (b - a >= 1_000_000) throw new Error(`'${part}': more than a million seeds`);
      for (let s = a; s <= b; s++) out.add(s);
    } else if (/^\d+$/.test(part)) out.add(Number(part));
    else throw new Error(`'${part}': expected a seed (17), a range (1..200) or a list of them (1..50,77)`);
  }
  if (out.size === 0) throw new Error(`'${text}': no seed`);
  return [...out].sort((x, y) => x - y);
}

/** The seeds of shard i/n of a seed list: every n-th, starting at the i-th (balanced: every seed costs about the same). */
export function seedShard(seeds: readonly number[], shard: Shard): number[] {
  return seeds.filter((_, i) => i % shard.count === shard.index - 1);
}


/**
 * One seed of a sweep: every check run at it, and the digest of every case its property checks
 * generated, here or in the child processes that report theirs (docs/spec/conformance.md#sweep-digests).
 */
export function sweepSeed(defs: readonly CheckDef[], seed: number, profile: Profile, selected: ReadonlySet<string>):
  { results: Pick<CheckResult, "id" | "status" | "message" | "replay" | "ms">[]; digest: CaseDigest } {
  const dg = new CaseDigester();
  const results = defs.flatMap((def) => {
    const r = runCheck(def, { seed, profile, selected, onCase: dg.add });
    const child = (r.details as { case_digest?: CaseDigest } | undefined)?.case_digest;
    if (child !== undefined) dg.addDigest(r.id, child);
    // a rule its kernel does not implement is no check of the sweep (docs/spec/conformance.md#undeclared)
    return isUndeclared(r) ? [] : [{ id: r.id, status: r.status, message: r.message, replay: r.replay, ms: r.ms }];
  });
  return { results, digest: dg.result() };
}

/** Accumulates the results of a sweep, in any order of seeds and checks. */
export class SweepTally {
  private readonly byId = new Map<string, SweepCheck>();
  private readonly seen = new Set<number>();
  private readonly digests = new Map<number, CaseDigest>();

  constructor(ids: readonly { id: string; class: CheckClass }[]) {
    for (const d of ids) this.byId.set(d.id, { id: d.id, class: d.class, seeds: 0, counts: emptyCounts(), nonpass: [], ms: 0 });
  }

  add(seed: number, r: Pick<CheckResult, "id" | "status" | "message" | "replay" | "ms">): void {
    const c = this.byId.get(r.id);
    if (c === undefined) throw new Error(`sweep: a result for ${r.id}, which is not selected`);
    this.seen.add(seed);
    c.seeds++;
    c.counts[r.status]++;
    c.ms += r.ms;
    if (NON_PASS.includes(r.status)) {
      c.nonpass.push({ seed, status: r.status, message: r.message ?? "", replay: r.replay });
      c.nonpass.sort((a, b) => a.seed - b.seed);
      c.nonpass.length = Math.min(c.nonpass.length, KEPT_PER_CHECK);
    }
  }

  /** The digest of the cases seed `seed` generated (conformance/sweep-worker.ts). */
  addDigest(seed: number, d: CaseDigest): void {
    this.digests.set(seed, d);
  }

  caseDigests(): Record<string, CaseDigest> {
    return Object.fromEntries([...this.digests].sort(([a], [b]) => a - b).map(([s, d]) => [String(s), d]));
  }

  /** Seeds with at least one result. */
  seeds(): number[] {
    return [...this.seen].sort((a, b) => a - b);
  }

  /** The checks that ran at some seed (a rule its kernel does not implement runs at none). */
  checks(): SweepCheck[] {
    return [...this.byId.values()].filter((c) => c.seeds > 0);
  }
}

function nonPassCount(c: SweepCheck): number {
  return NON_PASS.reduce((s, st) => s + c.counts[st], 0);
}

/**
 * Seeds that generated exactly the cases of an earlier seed (the same digest over at least one
 * case), as [earlier, later]: a sweep whose seeds did not reach its checks counts one seed's
 * verdicts many times and proves nothing beyond that seed.
 */
export function repeatedSeeds(digests: Readonly<Record<string, CaseDigest>> | undefined): [number, number][] {
  const first = new Map<string, number>();
  const out: [number, number][] = [];
  for (const [seed, d] of Object.entries(digests ?? {}).sort(([a], [b]) => Number(a) - Number(b))) {
    if (d.cases === 0) continue;
    const prev = first.get(d.digest);
    if (prev === undefined) first.set(d.digest, Number(seed));
    else out.push([prev, Number(seed)]);
  }
  return out;
}

/**
 * Whether a sweep's verdicts are all pass or skip, something passed (a sweep that tested nothing
 * fails as a run does: docs/spec/conformance.md#nothing-ran) and its seeds ran different cases.
 */
export function sweepClean(s: Sweep): boolean {
  return !s.checks.some((c) => NON_PASS.some((st) => c.counts[st] > 0)) && s.checks.some((c) => c.counts.pass > 0) && repeatedSeeds(s.run.case_digests).length === 0;
}

/** The lines a sweep prints: each check with a non-pass verdict (count, statuses, first seed and its replay), then the totals. */
export function formatSweep(s: Sweep): string {
  const lines: string[] = [];
  const bad = s.checks.filter((c) => nonPassCount(c) > 0);
  for (const c of bad) {
    const by = NON_PASS.filter((st) => c.counts[st] > 0).map((st) => `${c.counts[st]} ${st}`).join(", ");
    const first = c.nonpass[0]!;
    lines.push(`${c.id}: ${nonPassCount(c)} non-pass of ${c.seeds} seeds (${by}); first at seed ${first.seed}: ${first.status} ${first.message.slice(0, 300)}`);
    lines.push(`    replay: ${first.replay}`);
    lines.push(`    seeds: ${c.nonpass.map((v) => v.seed).join(" ")}${nonPassCount(c) > c.nonpass.length ? " …" : ""}`);
  }
  const total = emptyCounts();
  for (const c of s.checks) for (const st of Object.keys(total) as Status[]) total[st] += c.counts[st];
  const runs = Object.values(total).reduce((a, b) => a + b, 0);
  const np = NON_PASS.reduce((a, st) => a + total[st], 0);
  const seeds = s.run.seeds;
  const repeated = repeatedSeeds(s.run.case_digests);
  if (repeated.length > 0) {
    lines.push(`sweep: ${repeated.length} seed${repeated.length === 1 ? "" : "s"} generated exactly the cases of an earlier seed (${repeated.slice(0, 5).map(([a, b]) => `${b} as ${a}`).join(", ")}${repeated.length > 5 ? ", …" : ""}): ` +
      "their verdicts repeat that seed's and prove nothing more (docs/spec/conformance.md#sweep-digests)");
  }
  const digested = Object.values(s.run.case_digests ?? {}).filter((d) => d.cases > 0).length;
  if (s.run.case_digests !== undefined) lines.push(`sweep: cases digested at ${digested} of ${seeds.length} seeds${digested === seeds.length ? "" : " (the others ran no in-process property check)"}`);
  if (total.pass === 0 && np === 0) lines.push(`sweep: nothing ran: every check run (${runs}) was skipped`);
  lines.push(`sweep: ${seeds.length} seed${seeds.length === 1 ? "" : "s"} (${describeSeeds(seeds)}), ${s.checks.length} checks, ${runs} check runs: `
    + `${np} non-pass (${total.fail} fail, ${total.vacuous} vacuous, ${total.error} error) in ${bad.length} check${bad.length === 1 ? "" : "s"}; ${total.pass} pass, ${total.skip} skip`);
  return lines.join("\n");
}

/** 1..200 for a run of consecutive seeds, else the first few and a count. */
export function describeSeeds(seeds: readonly number[]): string {
  if (seeds.length === 0) return "none";
  const parts: string[] = [];
  let a = seeds[0]!, b = a;
  for (const s of [...seeds.slice(1), NaN]) {
    if (s === b + 1) b = s;
    else {
      parts.push(a === b ? `${a}` : `${a}..${b}`);
      a = b = s;
    }
  }
  return parts.length <= 6 ? parts.join(",") : `${parts.slice(0, 6).join(",")},…`;
}

/** Written through a temporary file and a rename, so a reader never sees half a sweep. */
export function writeSweep(s: Sweep, path: string): void {
  const abs = resolve(path);
  mkdirSync(dirname(abs), { recursive: true });
  const tmp = `${abs}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(s, null, 1) + "\n");
  renameSync(tmp, abs);
}

/** A sweep file that cannot be read or is not a sweep; the message names the file. */
export class SweepFileError extends Error {}

export function readSweepFile(path: string): Sweep {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new SweepFileError(`cannot read sweep ${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const s = raw as Partial<Sweep>;
  if (s?.format !== SWEEP_FORMAT || !Array.isArray(s.checks) || !Array.isArray(s.run?.seeds)) {
    throw new SweepFileError(`${path} is not an ${SWEEP_FORMAT} file`);
  }
  return s as Sweep;
}

const SAME = ["version", "revision", "profile", "filter"] as const;

/**
 * Sweeps over disjoint seed sets of one revision, profile and filter as one: counts added, the
 * non-pass verdicts joined by seed. A seed in two parts, a check in one part only, or a
 * different revision, profile or filter is an error naming the files.
 */
export function mergeSweeps(parts: readonly { path: string; sweep: Sweep }[]): Sweep {
  if (parts.length === 0) throw new SweepFileError("nothing to merge");
  const first = parts[0]!;
  const seedOwner = new Map<number, string>();
  for (const p of parts) {
    for (const f of SAME) {
      const a = first.sweep.run[f] ?? null, b = p.sweep.run[f] ?? null;
      if (a !== b) throw new SweepFileError(`${p.path}: run.${f} is ${JSON.stringify(b)}, but ${first.path} has ${JSON.stringify(a)}`);
    }
    for (const s of p.sweep.run.seeds) {
      const prev = seedOwner.get(s);
      if (prev !== undefined) throw new SweepFileError(`seed ${s} is in both ${prev} and ${p.path}`);
      seedOwner.set(s, p.path);
    }
    const ids = new Set(p.sweep.checks.map((c) => c.id));
    const missing = first.sweep.checks.find((c) => !ids.has(c.id)) ?? p.sweep.checks.find((c) => !first.sweep.checks.some((x) => x.id === c.id));
    if (missing !== undefined) throw new SweepFileError(`check ${missing.id} is not in both ${first.path} and ${p.path}: they ran different checks`);
  }
  const checks = first.sweep.checks.map((c0) => {
    const out: SweepCheck = { id: c0.id, class: c0.class, seeds: 0, counts: emptyCounts(), nonpass: [], ms: 0 };
    for (const p of parts) {
      const c = p.sweep.checks.find((x) => x.id === c0.id)!;
      out.seeds += c.seeds;
      out.ms += c.ms;
      for (const st of Object.keys(out.counts) as Status[]) out.counts[st] += c.counts[st] ?? 0;
      out.nonpass.push(...c.nonpass);
    }
    out.nonpass.sort((a, b) => a.seed - b.seed);
    out.nonpass.length = Math.min(out.nonpass.length, KEPT_PER_CHECK);
    return out;
  });
  const starts = parts.map((p) => p.sweep.run.started).sort(), ends = parts.map((p) => p.sweep.run.ended).sort();
  const { shard: _shard, jobs: _jobs, case_digests: _d, ...run } = first.sweep.run;
  const digests = parts.every((p) => p.sweep.run.case_digests !== undefined)
    ? { case_digests: Object.fromEntries(parts.flatMap((p) => Object.entries(p.sweep.run.case_digests!)).sort(([a], [b]) => Number(a) - Number(b))) }
    : {};
  return {
    format: SWEEP_FORMAT,
    run: { ...run, seeds: [...seedOwner.keys()].sort((a, b) => a - b), started: starts[0]!, ended: ends[ends.length - 1]!, ...digests },
    checks,
  };
}
