/**
 * The settings of a command-line run, read once at the edge into one typed record (RunRequest,
 * conformance/plan.ts): the command line, the repository's config file (nlc.config.json in the
 * directory the command runs in, or --config PATH; schema conformance/data/nlc-config.schema.json)
 * and the environment. A flag overrides the config, the config the environment. Every path in
 * them (py: and lib: modules, --report, --fixtures, --summary, the config) is relative to the
 * directory the command runs in, and the default report is written under it
 * (README#kernel-repositories).
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { fileValidator } from "../cases/schema-validator.ts";
import { PROFILES, type Profile } from "../harness/check.ts";
import { DEFAULT_SEED } from "../harness/collect.ts";
import { nearest } from "../harness/nearest.ts";
import { DEFAULT_MIN_POWER, parseMinPower } from "../harness/report-power.ts";
import { parseShard, type Shard } from "../harness/shard.ts";
import { ROOT } from "../paths.ts";
import { CLI_NAMES, UsageError, type RunRequest } from "./plan.ts";
import { kindOf, KINDS } from "./backend-kinds.ts";
import { environment } from "../environment.ts";

/** The config file a run reads from the directory it runs in, when present. */
export const CONFIG_FILE = "nlc.config.json";
const CONFIG_SCHEMA = join(ROOT, "conformance", "data", "nlc-config.schema.json");

/** Where a run writes its report unless told otherwise: under the directory it runs in. */
export const DEFAULT_REPORT_REL = join("reports", "conformance.json");
export const defaultReport = (cwd = process.cwd()): string => resolve(cwd, DEFAULT_REPORT_REL);

/** The config file's settings (the schema's keys). */
export interface ConfigFile {
  backends?: string[];
  profile?: Profile;
  seed?: number;
  filter?: string[];
  rule?: string;
  "min-power"?: string | number;
  report?: string;
  fixtures?: string[];
  require?: string[];
  "allow-skipped"?: boolean;
}

export const OPTIONS = {
  filter: { type: "string", multiple: true },
  rule: { type: "string" },
  seed: { type: "string" },
  profile: { type: "string" },
  report: { type: "string" },
  replay: { type: "string" },
  fixtures: { type: "string", multiple: true },
  backend: { type: "string", multiple: true },
  config: { type: "string" },
  "allow-skipped": { type: "boolean" },
  case: { type: "string" },
  out: { type: "string" },
  dump: { type: "string" },
  shard: { type: "string" },
  "min-power": { type: "string" },
  list: { type: "boolean" },
  summary: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

export type Args = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** The command line as options; a usage error names the option. */
export function parseCommandLine(argv: string[]): Args {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  } catch (e) {
    const unknown = /Unknown option '(--?[^']+)'/.exec(message(e));
    if (unknown !== null) {
      const near = nearest(unknown[1]!.replace(/^-+/, ""), Object.keys(OPTIONS));
      throw new UsageError(`${message(e)}${near !== null ? `; did you mean --${near}?` : ""}`);
    }
    throw new UsageError(message(e));
  }
}

/** The known keys of the config file, for the nearest-key message. */
const CONFIG_KEYS = (JSON.parse(readFileSync(CONFIG_SCHEMA, "utf8")) as { properties: Record<string, unknown> }).properties;

/**
 * Reads and validates a config file; a UsageError names the file and the field (an unknown key
 * with the nearest known one). `path` null: nlc.config.json in `cwd` if there is one.
 */
export function readConfig(path: string | null, cwd = process.cwd()): { path: string; config: ConfigFile } | null {
  const file = resolve(cwd, path ?? CONFIG_FILE);
  if (path === null && !existsSync(file)) return null;
  const where = path ?? CONFIG_FILE;
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new UsageError(`${where}: ${existsSync(file) ? `not valid JSON (${message(e)})` : "no such file"}`);
  }
  const { validate } = fileValidator(CONFIG_SCHEMA, { allErrors: true, strict: true });
  if (!validate(data)) {
    const errs = (validate.errors ?? []) as { instancePath: string; keyword: string; message?: string; params: Record<string, unknown> }[];
    const first = errs.find((e) => e.keyword === "additionalProperties") ?? errs[0]!;
    if (first.keyword === "additionalProperties") {
      const key = String(first.params.additionalProperty);
      const near = nearest(key, Object.keys(CONFIG_KEYS).filter((k) => k !== "$schema"));
      throw new UsageError(`${where}: unknown key '${key}'${near !== null ? `; did you mean '${near}'?` : ` (known keys: ${Object.keys(CONFIG_KEYS).join(", ")})`}`);
    }
    const field = first.instancePath.replace(/^\//, "").replace(/\//g, ".") || "(top level)";
    const allowed = first.params.allowedValues as unknown[] | undefined;
    throw new UsageError(`${where}: ${field} ${first.message ?? "is invalid"}${allowed ? ` (${allowed.map((v) => JSON.stringify(v)).join(", ")})` : ""}`);
  }
  return { path: file, config: data as ConfigFile };
}

/**
 * The settings of a run: the options over the config file over the environment (each backend
 * kind's variable, read where the backends are resolved). Throws UsageError naming the setting.
 */
export function runSettings(args: Args["values"], cwd = process.cwd()): RunRequest {
  const loaded = readConfig(args.config ?? null, cwd);
  const c = loaded?.config ?? {};
  const cfg = (key: string) => `${args.config ?? CONFIG_FILE} ${key}`;
  const seed = args.seed !== undefined ? Number(args.seed) : c.seed ?? DEFAULT_SEED;
  if (!Number.isInteger(seed)) throw new UsageError(`--seed ${args.seed}: expected an integer`);
  const profile = (args.profile ?? c.profile ?? "default") as Profile;
  if (!PROFILES.includes(profile)) throw new UsageError(`--profile ${args.profile}: expected ${PROFILES.join(" | ")}`);
  const filters = (args.filter ?? c.filter ?? []).flatMap((f) => f.split(",")).map((f) => f.trim()).filter(Boolean);
  let replay: RunRequest["replay"];
  if (args.replay !== undefined) {
    const m = /^(.+?):(\d+):([\d:]*)$/.exec(args.replay);
    if (m === null) throw new UsageError(`--replay ${args.replay}: expected <check id>:<seed>:<path>`);
    replay = { id: m[1]!, seed: Number(m[2]), path: m[3]! };
    if (args.dump !== undefined) {
      if (replay.path === "") throw new UsageError(`--dump writes one case: --replay ${args.replay} names none (its path is empty: a failing case's replay line names one)`);
      replay = { ...replay, dump: resolve(cwd, args.dump) };
    }
  }
  let shard: Shard | undefined;
  if (args.shard !== undefined) {
    try {
      shard = parseShard(args.shard);
    } catch (e) {
      throw new UsageError(`--shard ${message(e)}`);
    }
  }
  const report = args.report ?? c.report;
  const reportPath = replay === undefined || args.report !== undefined ? report ?? defaultReport(cwd) : null;
  let minPower: number | null = DEFAULT_MIN_POWER;
  const mp = args["min-power"] ?? c["min-power"];
  if (mp !== undefined) {
    try {
      minPower = parseMinPower(String(mp), args["min-power"] !== undefined ? "--min-power" : cfg("min-power"));
    } catch (e) {
      throw new UsageError(message(e));
    }
  }
  const backends = args.backend ?? c.backends;
  if (replay === undefined) filters.push(...kernelOnlyFilters(filters, backends));
  const names = configNames(args, c, args.config ?? CONFIG_FILE);
  return {
    seed, profile, filters, rule: args.rule ?? c.rule, replay, fixtureDirs: args.fixtures ?? c.fixtures ?? [],
    backends: backends?.map((b) => absoluteBackend(b, cwd)), shard, reportPath, names, minPower,
    explicitBackends: backends?.map((b) => absoluteBackend(b, cwd)) ?? KINDS.flatMap((k) => k.namedByEnvironment?.(environment()) ?? []),
    require: replay === undefined ? c.require ?? [] : [],
    allowSkipped: args["allow-skipped"] ?? c["allow-skipped"] ?? false,
    ...(loaded !== null ? { configPath: loaded.path } : {}),
  };
}

/**
 * How each setting a message names is spelled where it came from: the option, or the config file
 * and its field when the file set it (`nlc.config.json rule`).
 */
export function configNames(args: { backend?: unknown; filter?: unknown; rule?: unknown; report?: unknown }, c: ConfigFile, file: string): RunRequest["names"] {
  const from = <K extends keyof typeof args>(flag: K, key: keyof ConfigFile, cli: string) => (args[flag] === undefined && c[key] !== undefined ? `${file} ${key}` : cli);
  return {
    ...CLI_NAMES,
    backend: from("backend", "backends", CLI_NAMES.backend), filter: from("filter", "filter", CLI_NAMES.filter),
    rule: from("rule", "rule", CLI_NAMES.rule), report: from("report", "report", CLI_NAMES.report),
  };
}

/** A --backend value with its paths made absolute (its kind's `absolute`, backend-kinds.ts). */
export function absoluteBackend(b: string, cwd: string): string {
  return kindOf(b).absolute?.(b, cwd) ?? b;
}

/**
 * A run (or sweep) that names only backends that select their own checks (a py: kernel's, a lib:
 * library's: backend-kinds.ts `ownFilter`) and no --filter runs those backends' checks, not the
 * suite's own (docs/spec/decisions.md, the user's kernels alone): the filters that select them
 * (none when a filter selects, or when one of the suite's own builds is named). --rule then
 * narrows them to that rule of those backends.
 */
export function kernelOnlyFilters(filters: readonly string[], backends: readonly string[] | undefined): string[] {
  if (filters.length > 0 || backends === undefined || backends.length === 0) return [];
  const own = backends.map((b) => kindOf(b).ownFilter?.(b) ?? null);
  return own.every((f) => f !== null) ? own : [];
}
