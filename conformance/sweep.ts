/**
 * `npm run conformance -- sweep --seeds 1..200 [--filter F] [--shard I/N] [--profile P] [--out FILE] [--jobs N]`:
 * the selected checks at many run seeds, in worker threads that each build the catalogue once
 * (docs/spec/conformance.md#sweeps). Prints, per check with a non-pass verdict, the count, the
 * first failing seed and its replay line; writes an nlc-sweep/1 file after every seed (so an
 * interrupted sweep keeps what finished). `sweep-merge A B ... --out FILE` joins sweeps over
 * disjoint seeds (shards, other machines). Exit: 0 when every verdict was pass or skip and
 * something passed, 1 otherwise (a sweep that tested nothing fails as a run does), 2 on a usage
 * error.
 */
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { mergeArgs } from "./report-commands.ts";
import { planRun } from "./plan.ts";
import { UsageError } from "../harness/usage-error.ts";
import { absoluteBackend, CONFIG_FILE, configNames, kernelOnlyFilters, readConfig } from "./settings.ts";
import { takeHandovers, type GeneratorKey } from "./catalogue.ts";
import type { CatalogueSettings } from "./catalogue-settings.ts";
import { PROFILES, type Profile, type Status } from "../harness/check.ts";
import { runInfo } from "../harness/report.ts";
import { parseShard, type Shard } from "../harness/shard.ts";
import { environment, type Environment } from "../environment.ts";
import {
  describeSeeds, formatSweep, mergeSweeps, NON_PASS, parseSeeds, readSweepFile, seedShard, sweepClean, SWEEP_FORMAT, SweepFileError, SweepTally, writeSweep,
  type Sweep,
} from "../harness/sweep.ts";
import type { CaseDigest } from "../harness/case-digest.ts";

export const SWEEP_COMMANDS = ["sweep", "sweep-merge"] as const;
export type SweepCommand = (typeof SWEEP_COMMANDS)[number];

export const SWEEP_HELP = `Sweeps (docs/spec/conformance.md#sweeps):
  sweep --seeds S [--filter F]... [--rule KEY] [--backend B]... [--profile P] [--config FILE]
        [--shard I/N] [--out FILE] [--jobs N]
                   run the selected checks at every run seed in S (1..200, 1,5,9 or a mix),
                   in N worker threads (default: 2, or the cores if fewer); the selection
                   flags and the config file (./${CONFIG_FILE}) as for a run;
                   prints per check the non-pass count, the first failing seed and its replay;
                   --shard I/N takes every N-th seed of S from the I-th; writes FILE
                   (default reports/sweep.json, nlc-sweep/1) after every seed; exit 1 on any
                   fail, vacuous or error, or when nothing ran (every check skipped)
  sweep-merge A B ... --out FILE
                   join sweeps over disjoint seeds of one revision, profile and filter`;

export interface SweepWorkerResult {
  id: string;
  status: Status;
  message?: string;
  replay: string;
  ms: number;
}

/** The first message to a sweep worker (conformance/sweep-worker.ts). */
export interface SweepWorkerInit {
  kind: "init";
  /** The selected checks, by id, as the main thread's plan chose them. */
  ids: string[];
  /** What the worker builds the checks from: the plan's settings (catalogue-settings.ts), as data. */
  settings: CatalogueSettings;
  /** The catalogue's generators that made the checks `ids` (catalogue.ts): the worker builds those alone. */
  generators: GeneratorKey[];
  /** The main thread's environment record as read at start-up (never written after), adopted before anything reads it. */
  environment: Environment;
  profile: Profile;
  /** What the main thread learnt for these checks (catalogue.ts takeHandovers: whether C9 can run here), adopted before the catalogue is built. */
  handovers: unknown[];
}

export type SweepWorkerMessage =
  | { kind: "ready" }
  | { kind: "seed"; seed: number; results: SweepWorkerResult[]; digest: CaseDigest }
  | { kind: "failed"; message: string };

/** The options of `sweep`. */
export const SWEEP_OPTIONS = {
  seeds: { type: "string" }, filter: { type: "string", multiple: true }, profile: { type: "string" },
  shard: { type: "string" }, out: { type: "string" }, jobs: { type: "string" },
  rule: { type: "string" }, backend: { type: "string", multiple: true }, config: { type: "string" },
} as const;

function usage(msg: string): never {
  throw new UsageError(msg);
}

const DEFAULT_OUT = "reports/sweep.json";

async function sweep(argv: string[]): Promise<number> {
  let args;
  try {
    ({ values: args } = parseArgs({
      args: argv,
      options: SWEEP_OPTIONS,
      allowPositionals: false,
    }));
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  if (args.seeds === undefined) usage("sweep needs --seeds, e.g. --seeds 1..200");
  let seeds: number[];
  try {
    seeds = parseSeeds(args.seeds);
  } catch (e) {
    usage(`--seeds ${e instanceof Error ? e.message : String(e)}`);
  }
  let config;
  try {
    config = readConfig(args.config ?? null)?.config ?? {};
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  const profile = (args.profile ?? config.profile ?? "default") as Profile;
  if (!PROFILES.includes(profile)) usage(`--profile ${args.profile}: expected ${PROFILES.join(" | ")}`);
  let shard: Shard | undefined;
  if (args.shard !== undefined) {
    try {
      shard = parseShard(args.shard);
    } catch (e) {
      usage(`--shard ${e instanceof Error ? e.message : String(e)}`);
    }
    seeds = seedShard(seeds, shard);
    if (seeds.length === 0) usage(`--shard ${args.shard}: no seed of --seeds ${args.seeds} falls in this shard`);
  }
  const jobs = args.jobs === undefined ? Math.min(2, availableParallelism()) : Number(args.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) usage(`--jobs ${args.jobs}: expected a positive integer`);
  const filters = (args.filter ?? config.filter ?? []).flatMap((f) => f.split(",")).map((f) => f.trim()).filter(Boolean);
  const rule = args.rule ?? config.rule;
  const backends = (args.backend ?? config.backends)?.map((b) => absoluteBackend(b, process.cwd()));
  filters.push(...kernelOnlyFilters(filters, backends));
  // the selection as a run makes it (conformance/plan.ts), and handed to the workers as ids
  let defs, settings, catalogue;
  try {
    ({ defs, settings, catalogue } = planRun({
      seed: 0, profile, filters, rule, fixtureDirs: [], backends, reportPath: null, minPower: null,
      names: { ...configNames(args, config, args.config ?? CONFIG_FILE), report: "--out" },
    }));
  } catch (e) {
    if (e instanceof UsageError) usage(e.message);
    throw e;
  }
  if (defs.length === 0) usage(`no check matches ${filters.join(", ")} (try --list)`);
  const selection = [...filters, ...(rule === undefined ? [] : [`rule=${rule}`])].join(",") || null;
  const out = args.out ?? DEFAULT_OUT;

  const started = new Date();
  const info = runInfo(started, 0, profile, selection, []);
  const tally = new SweepTally(defs);
  const snapshot = (): Sweep => ({
    format: SWEEP_FORMAT,
    run: {
      version: info.version, revision: info.revision, profile, filter: info.filter, seeds: tally.seeds(),
      started: started.toISOString(), ended: new Date().toISOString(), ...(shard ? { shard } : {}), jobs, case_digests: tally.caseDigests(),
    },
    checks: tally.checks(),
  });
  console.log(`sweep: ${defs.length} checks x ${seeds.length} seeds (${describeSeeds(seeds)}), profile ${profile}, ${jobs} worker${jobs === 1 ? "" : "s"}${shard ? `, shard ${shard.index}/${shard.count}` : ""}`);

  const queue = [...seeds];
  let done = 0;
  const init: SweepWorkerInit = {
    kind: "init", ids: defs.map((d) => d.id), profile, settings, generators: catalogue.generatorsOf(defs.map((d) => d.id)),
    environment: environment(), handovers: takeHandovers(defs),
  };
  const workers = Array.from({ length: Math.min(jobs, seeds.length) }, () => new Promise<void>((resolve, reject) => {
    const w = new Worker(new URL("./sweep-worker.ts", import.meta.url).href);
    let t0 = performance.now();
    const next = () => {
      const seed = queue.shift();
      if (seed === undefined) {
        w.terminate();
        resolve();
        return;
      }
      t0 = performance.now();
      w.postMessage({ kind: "seed", seed });
    };
    w.onmessage = (ev: MessageEvent<SweepWorkerMessage>) => {
      const m = ev.data;
      if (m.kind === "ready") next();
      else if (m.kind === "seed") {
        for (const r of m.results) tally.add(m.seed, r);
        tally.addDigest(m.seed, m.digest);
        done++;
        console.log(`[${String(done).padStart(String(seeds.length).length)}/${seeds.length}] seed ${m.seed}: ${seedVerdict(m.results)} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
        writeSweep(snapshot(), out);
        next();
      } else {
        w.terminate();
        reject(new Error(`a sweep worker failed: ${m.message}`));
      }
    };
    w.onerror = (e) => {
      w.terminate();
      reject(new Error(`a sweep worker failed: ${e.message}`));
    };
    w.postMessage(init);
  }));
  await Promise.all(workers);
  const result = snapshot();
  writeSweep(result, out);
  console.log(formatSweep(result));
  const undeclared = defs.length - result.checks.length;
  if (undeclared > 0) console.log(`sweep: ${undeclared} selected checks are of rules their kernels do not implement: not run (docs/spec/conformance.md#undeclared)`);
  console.log(`sweep: ${out}`);
  return sweepClean(result) ? 0 : 1;
}

/** One seed's verdict: its non-pass checks, or "all pass" when something passed, else that nothing ran and why. */
export function seedVerdict(results: readonly Pick<SweepWorkerResult, "id" | "status" | "message">[]): string {
  const bad = results.filter((r) => NON_PASS.includes(r.status));
  if (bad.length > 0) return `${bad.length} non-pass: ${bad.map((r) => `${r.id} ${r.status}`).join(", ")}`;
  const skipped = results.filter((r) => r.status === "skip");
  if (skipped.length === results.length) {
    const reasons = [...new Set(skipped.map((r) => r.message ?? "").filter((m) => m !== ""))];
    return `nothing ran: every check (${skipped.length}) was skipped${reasons.length > 0 ? ` (${reasons.slice(0, 2).join("; ")}${reasons.length > 2 ? "; ..." : ""})` : ""}`;
  }
  return `all pass${skipped.length > 0 ? ` (${results.length - skipped.length} passed, ${skipped.length} skipped)` : ""}`;
}

function merge(argv: string[]): number {
  const { out, files } = mergeArgs(argv, "sweep-merge", "the sweep files to join", usage);
  const merged = mergeSweeps(files.map((path) => ({ path, sweep: readSweepFile(path) })));
  writeSweep(merged, out);
  console.log(formatSweep(merged));
  console.log(`sweep-merge: ${files.length} sweeps -> ${out}`);
  return sweepClean(merged) ? 0 : 1;
}

/** Runs a sweep command; returns its exit status (2 for usage errors, printed to stderr). */
export async function runSweepCommand(name: SweepCommand, argv: string[]): Promise<number> {
  try {
    return name === "sweep" ? await sweep(argv) : merge(argv);
  } catch (e) {
    if (e instanceof UsageError || e instanceof SweepFileError) {
      console.error(`conformance ${name}: ${e.message}\n(see --help)`);
      return 2;
    }
    throw e;
  }
}
