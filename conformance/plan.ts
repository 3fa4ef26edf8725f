/**
 * A run's plan: what `npm run conformance` and `bun test` (conformance/conformance.test.ts) both
 * turn their settings into before any check runs — the catalogue, the selected checks (filter,
 * replay, shard), the backends and where the report goes. Everything wrong with the settings is
 * found here, as a UsageError naming the setting, before the first check
 * (docs/spec/conformance.md#one-scheduler).
 */
import { existsSync, mkdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { CheckDef, Profile } from "../harness/check.ts";
import { selectShard, type Shard } from "../harness/shard.ts";
import { nearest } from "../harness/nearest.ts";
import { buildCatalogue, matchesFilter, type Catalogue } from "./catalogue.ts";
import { variantKey } from "../src/rules/level.ts";
import { kindOf, KINDS } from "./backend-kinds.ts";
import { configLimit, type ConfigLimit } from "../harness/configurations.ts";
import { UsageError } from "../harness/usage-error.ts";
import { environment, type Environment } from "../environment.ts";
import type { CatalogueSettings } from "./catalogue-settings.ts";

/** A setting that cannot be used (exit status 2); the message names the setting (harness/usage-error.ts). */
export { UsageError };

/** The settings of one run, from command-line options or from the NLC_* environment. */
export interface RunRequest {
  seed: number;
  profile: Profile;
  /** Alternatives (a class, a rule key, a substring of a check id); empty selects everything. */
  filters: string[];
  /** --rule: only the checks of this rule (a key such as delta, or a variant such as delta.frozen), intersected with `filters`. */
  rule?: string;
  /** Re-run one case exactly. */
  replay?: { id: string; seed: number; path: string; dump?: string };
  fixtureDirs: string[];
  /** --backend values; undefined: each kind's variable of the environment names its backends (backend-kinds.ts). */
  backends?: string[];
  shard?: Shard;
  /** Where the report goes; null writes none (a replay without --report). */
  reportPath: string | null;
  /** --min-power / NLC_MIN_POWER: the scale error every passing kernel check's gradients must detect (docs/spec/precision.md#min-power); null or absent: off. */
  minPower?: number | null;
  /** The backends named by --backend or the config file: each must run a check (docs/spec/conformance.md#nothing-ran). */
  explicitBackends?: string[];
  /** The config file's `require`: each entry (as a filter) must select a check that passed. */
  require?: string[];
  /** --allow-skipped: a run in which nothing ran is not a failure. */
  allowSkipped?: boolean;
  /** The config file the settings came from, if any. */
  configPath?: string;
  /** How the setting is spelled where it came from ("--filter" or "NLC_FILTER", ...), for messages. */
  names: { filter: string; backend: string; report: string; shard: string; rule: string };
}

export interface RunPlan {
  readonly request: RunRequest;
  /** What the catalogue was built from, made once here; worker threads get it as data (catalogue-settings.ts). */
  readonly settings: CatalogueSettings;
  readonly catalogue: Catalogue;
  /** The checks to run, in catalogue order. */
  readonly defs: readonly CheckDef[];
  readonly selected: ReadonlySet<string>;
}

export const CLI_NAMES: RunRequest["names"] = { filter: "--filter", backend: "--backend", report: "--report", shard: "--shard", rule: "--rule" };
export const ENV_NAMES: RunRequest["names"] = { filter: "NLC_FILTER", backend: "NLC_BACKENDS", report: "NLC_REPORT", shard: "NLC_SHARD", rule: "--rule" };

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/**
 * The settings the catalogue is built from, made once, at start-up (catalogue-settings.ts): the
 * kernel backends from --backend (or the config file), else from each kind's variable of the
 * environment record (`env`, read, never written), and the configuration limit. Each value is
 * checked by its kind (backend-kinds.ts); what is wrong is a UsageError naming the setting.
 */
export function catalogueSettings(req: Pick<RunRequest, "backends" | "fixtureDirs" | "names">, env: Environment = environment()): CatalogueSettings {
  const flag = req.names.backend;
  const backends: string[] = [];
  if (req.backends !== undefined) {
    for (const b of req.backends) {
      const problem = kindOf(b).problem(b, flag);
      if (problem !== null) throw new UsageError(problem);
    }
    for (const kind of KINDS) {
      const problem = kind.together(req.backends.filter((b) => kindOf(b) === kind), flag);
      if (problem !== null) throw new UsageError(problem);
    }
    backends.push(...req.backends.filter((b) => b !== "ref"));
  } else {
    for (const kind of KINDS) {
      const problem = kind.environmentProblem?.(env) ?? null;
      if (problem !== null) throw new UsageError(problem);
      let names: string[];
      try {
        names = kind.fromEnvironment(env);
      } catch (e) {
        throw new UsageError(message(e));
      }
      const together = kind.together(names, kind.variable);
      if (together !== null) throw new UsageError(together);
      backends.push(...names);
    }
  }
  let limit: ConfigLimit;
  try {
    limit = configLimit(env); // NLC_KERNEL_CONFIGS (docs/spec/py-backend.md#configurations, kernel-abi.md#variants)
  } catch (e) {
    throw new UsageError(message(e));
  }
  return { backends: [...new Set(backends)], namesReference: req.backends?.includes("ref") === true, fixtureDirs: [...req.fixtureDirs], configLimit: limit };
}

/** Why a report cannot be written at `path` (asked before the run, so no result is lost), or null. */
function unwritable(path: string): string | null {
  const full = resolve(path);
  if (existsSync(full) && statSync(full).isDirectory()) return "is a directory (name a file, e.g. reports/conformance.json)";
  const dir = dirname(full);
  try {
    mkdirSync(dir, { recursive: true });
    // The report is written as a temp file next to it, then renamed: try exactly that.
    const probe = `${full}.${process.pid}.probe`;
    writeFileSync(probe, "");
    unlinkSync(probe);
  } catch (e) {
    return `cannot write into ${dir} (${message(e)})`;
  }
  return null;
}

/** Turns the settings into the checks to run; throws UsageError on anything that cannot run. */
export function planRun(req: RunRequest): RunPlan {
  const n = req.names;
  const settings = catalogueSettings(req);
  let catalogue: Catalogue;
  try {
    catalogue = buildCatalogue(settings);
  } catch (e) {
    throw new UsageError(message(e));
  }
  const { filters, replay } = req;
  let defs: CheckDef[];
  if (replay !== undefined) {
    defs = catalogue.checks.filter((c) => c.id === replay.id);
    if (defs.length === 0) throw new UsageError(`--replay: no check with id '${replay.id}' (try --list)`);
  } else {
    const idle = filters.filter((f) => !catalogue.checks.some((c) => matchesFilter(c, [f])));
    if (idle.length > 0) throw new UsageError(`${n.filter}: ${idle.map((f) => `'${f}'`).join(", ")} matches no check (try --list)`);
    defs = catalogue.checks.filter((c) => matchesFilter(c, filters));
    const rule = req.rule;
    if (rule !== undefined) {
      const ofRule = (c: CheckDef) => c.subject.rule !== undefined && (c.subject.rule === rule || variantKey(c.subject.rule, c.subject.frozen === true) === rule);
      if (!catalogue.checks.some(ofRule)) {
        const keys = [...new Set(catalogue.checks.flatMap((c) => (c.subject.rule === undefined ? [] : [variantKey(c.subject.rule, c.subject.frozen === true)])))];
        const near = nearest(rule, keys);
        throw new UsageError(`${n.rule} '${rule}': no check of that rule${near !== null ? `; did you mean '${near}'?` : ""} (a rule key such as delta, or a variant such as delta.frozen; try --list)`);
      }
      defs = defs.filter(ofRule);
    }
  }
  if (req.shard !== undefined) {
    if (replay !== undefined) throw new UsageError(`${n.shard} does not apply to --replay`);
    defs = selectShard(defs, req.shard);
  }
  if (req.reportPath !== null) {
    const problem = unwritable(req.reportPath);
    if (problem !== null) throw new UsageError(`${n.report} ${req.reportPath}: ${problem}`);
  }
  return { request: req, settings, catalogue, defs, selected: new Set(defs.map((d) => d.id)) };
}

/**
 * The plan narrowed to the checks whose id `pattern` matches: `npm test -- -t PATTERN` runs the
 * conformance checks bun test would run, not the whole catalogue for one test of tests/.
 */
export function byTestName(plan: RunPlan, pattern: RegExp): RunPlan {
  const defs = plan.defs.filter((d) => pattern.test(d.id));
  return { ...plan, defs, selected: new Set(defs.map((d) => d.id)) };
}

/**
 * Before the first check: a configured backend that cannot be used at all is one usage error
 * naming it, not an error per check (each kind's `preflight`, backend-kinds.ts; a library backend
 * that cannot be loaded, docs/spec/kernel-abi.md#external).
 */
export function preflightBackends(plan: RunPlan): void {
  for (const kind of KINDS) {
    const problem = kind.preflight?.(plan.defs, plan.request.names.backend, plan.settings) ?? null;
    if (problem !== null) throw new UsageError(problem);
  }
}

