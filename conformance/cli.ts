/**
 * `bun run conformance` — runs the conformance catalogue and writes the JSON report.
 * The same engine serves `bun test` (conformance/conformance.test.ts).
 */
import { kernelBackendNames } from "../ffi/backends.ts";
import { probeBackends } from "./c5/spawn.ts";
import { parseVariantKey, variantKey } from "../src/rules/level.ts";
import { parseArgs } from "node:util";
import { buildCatalogue, matchesFilter } from "./catalogue.ts";
import { buildRuleCase, parseRuleCaseRequest, type RuleCaseRequest } from "../cases/rule-case.ts";
import { PROFILES, type CheckDef, type CheckResult, type Profile } from "../harness/check.ts";
import { DEFAULT_SEED } from "../harness/collect.ts";
import { closingLine, DEFAULT_REPORT, NO_REPORT_LINE, runInfo, summarize, validateReport, writeReport, type Summary } from "../harness/report.ts";
import { mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { runCheck } from "../harness/run.ts";
import { catchInterrupts, interruptedBy, partialPath, signalExitCode } from "../harness/interrupt.ts";
import { isRunner, superviseSelf } from "./supervise.ts";
import { Progress } from "../harness/progress.ts";
import { delegatedBatches, mergeBackendInfo, parallelEnabled, runBatchInWorker } from "./parallel.ts";
import { c9SkipReason } from "./c9/checks.ts";
import type { InterruptSignal } from "../oracle/child-signals.ts";
import type { BackendInfo } from "../harness/report.ts";
import { parseShard, selectShard, type Shard } from "../harness/shard.ts";
import { REPORT_COMMANDS, REPORT_COMMANDS_HELP, runReportCommand, type ReportCommand } from "./report-commands.ts";
import { ruleFixture } from "../cases/fixtures/rule-fixture.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { PY_PREFIX, parsePyBackendArg } from "./py/plan.ts";
import { SWEEP_COMMANDS, SWEEP_HELP, runSweepCommand, type SweepCommand } from "./sweep.ts";

const HELP = `usage: npm run conformance -- [options]   (or: bun run conformance [options])
       npm run conformance -- diff OLD NEW | html REPORT [--out FILE] | merge A B ... --out FILE
                              | timings REPORT

Runs the nl-conformance checks (classes C0-C9) and writes an nlc-report/1 JSON report.

  --filter F       run checks matching F: a class (C2), a rule (moneta, moneta.frozen),
                   or any substring of a check id; repeatable, or comma-separated
  --rule KEY       same as --filter KEY (with --case: the rule of the case)
  --seed N         run seed (default ${DEFAULT_SEED}); the same seed gives the same report
  --profile P      quick | default | deep: property runs per check (default: default)
  --report PATH    where to write the report (default reports/conformance.json)
  --replay R       re-run one case exactly: R = <check id>:<seed>:<path>, as printed
                   in a report's "replay" field
  --fixtures DIR   also replay the nlc-fixture/1 files in DIR (C6); repeatable
  --backend B      kernel backend for C5: cpu-emu, cuda, the pure-f32 builds cpu-f32 and
                   cuda-f32, the bf16-storage builds cpu-bf16 and cuda-bf16, or lib:<path> (a library implementing
                   ffi/nlk.h); repeatable; default cpu-emu and cuda;
                   or py:<module>:<callable>, a PyTorch/Triton kernel pair (module: a
                   dotted name, or a path to a .py file; docs/spec/py-backend.md)
  --case JSON      with --rule: print one rule case (inputs, outputs, gradients) as an
                   nlc-fixture/1 document, e.g.
                   --rule moneta --case '{"d":4,"seq_len":3,"seed":7,"hyper":{"p":3}}'
                   fields: d, seq_len, seed, hyper, frozen, state ("init"|"random"),
                   alpha ("low"|"mid"|"high"), theta ("small"|"large")
  --shard I/N      run only shard I of N (1-based): a deterministic partition of the
                   selected checks balanced by measured check times; merge the shards'
                   reports with the merge command
  --list           list the check ids and exit
  --summary [PATH] print the closing line of an existing report (default
                   reports/conformance.json) and exit 1 unless it is all pass/skip
  -h, --help       this text

Delegated checks (C5 kernel children, the C9 cross-check) run in worker threads beside the
others; NLC_SERIAL=1 runs everything in one thread (the report is the same apart from timings).

Exit status: 0 when every check passed or was skipped; 1 when any check failed, was vacuous
or errored; 2 on a usage error; 130 (SIGINT) or 143 (SIGTERM) when interrupted. An interrupted
run passes the signal to its child processes, stops after the check in flight and writes what
finished to <report>.partial.json ("partial": true), leaving the report itself as it was.

${REPORT_COMMANDS_HELP}

${SWEEP_HELP}`;

function usage(msg: string): never {
  console.error(`conformance: ${msg}\n(see --help)`);
  process.exit(2);
}

/** Whether this command line runs checks (then it runs in a supervised child, see supervise.ts). */
function runsChecks(argv: readonly string[]): boolean {
  return !argv.some((a) => ["-h", "--help", "--list", "--summary", "--case"].includes(a));
}

async function main(): Promise<void> {
  const sub = process.argv[2];
  if ((REPORT_COMMANDS as readonly string[]).includes(sub ?? "")) process.exit(runReportCommand(sub as ReportCommand, process.argv.slice(3)));
  if ((SWEEP_COMMANDS as readonly string[]).includes(sub ?? "")) process.exit(await runSweepCommand(sub as SweepCommand, process.argv.slice(3)));
  if (!isRunner() && runsChecks(process.argv.slice(2))) process.exit(await superviseSelf());
  if (runsChecks(process.argv.slice(2))) catchInterrupts();
  let args, positionals: string[];
  try {
    ({ values: args, positionals } = parseArgs({
      args: process.argv.slice(2),
      options: {
        filter: { type: "string", multiple: true },
        rule: { type: "string" },
        seed: { type: "string" },
        profile: { type: "string" },
        report: { type: "string" },
        replay: { type: "string" },
        fixtures: { type: "string", multiple: true },
        backend: { type: "string", multiple: true },
        case: { type: "string" },
        shard: { type: "string" },
        list: { type: "boolean" },
        summary: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      allowPositionals: true,
    }));
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  if (args.help) {
    console.log(HELP);
    return;
  }
  if (args.summary) {
    printSummary(positionals[0] ?? DEFAULT_REPORT);
    return;
  }
  if (positionals.length > 0) usage(`unexpected argument ${positionals[0]}`);
  const seed = args.seed === undefined ? DEFAULT_SEED : Number(args.seed);
  if (!Number.isInteger(seed)) usage(`--seed ${args.seed}: expected an integer`);
  const profile = (args.profile ?? "default") as Profile;
  if (!PROFILES.includes(profile)) usage(`--profile ${args.profile}: expected ${PROFILES.join(" | ")}`);

  if (args.case !== undefined) {
    if (args.rule === undefined) usage("--case needs --rule");
    printCase(args.rule, args.case);
    return;
  }

  const filters = (args.filter ?? []).flatMap((f) => f.split(",")).map((f) => f.trim()).filter(Boolean);
  if (args.rule !== undefined) filters.push(args.rule);
  let replay: { id: string; seed: number; path: string } | undefined;
  if (args.replay !== undefined) {
    const m = /^(.+?):(\d+):([\d:]*)$/.exec(args.replay);
    if (m === null) usage(`--replay ${args.replay}: expected <check id>:<seed>:<path>`);
    replay = { id: m[1]!, seed: Number(m[2]), path: m[3]! };
  }

  // The kernel backends are read from the environment, which the C5 child processes inherit too.
  for (const b of args.backend ?? []) {
    if (b === "lib:" || b.trim() === "") usage(`--backend '${b}': a library backend needs a path, e.g. lib:/path/to/libnlk.so`);
  }
  if (args.backend !== undefined) {
    // py:<module>:<callable> (a PyTorch/Triton kernel, conformance/py) travels apart from the C libraries
    const py = args.backend.filter((b) => b.startsWith(PY_PREFIX)), libs = args.backend.filter((b) => !b.startsWith(PY_PREFIX));
    for (const b of py) {
      try {
        parsePyBackendArg(b);
      } catch (e) {
        usage(e instanceof Error ? e.message : String(e));
      }
    }
    process.env.NLC_PY_BACKENDS = py.join(",");
    process.env.NLC_BACKENDS = libs.length > 0 ? libs.join(",") : "ref";
  }
  let cat;
  try {
    cat = buildCatalogue({ fixtureDirs: args.fixtures ?? [] });
  } catch (e) {
    usage(e instanceof Error ? e.message : String(e));
  }
  let defs = replay !== undefined
    ? cat.checks.filter((c) => c.id === replay!.id)
    : cat.checks.filter((c) => matchesFilter(c, filters));
  if (replay !== undefined && defs.length === 0) usage(`--replay: no check with id '${replay.id}' (try --list)`);
  if (defs.length === 0) usage(`no check matches ${filters.join(", ")} (try --list)`);
  const idle = replay === undefined ? filters.filter((f) => !cat.checks.some((c) => matchesFilter(c, [f]))) : [];
  if (idle.length > 0) usage(`--filter: ${idle.map((f) => `'${f}'`).join(", ")} matches no check (try --list)`);
  let shard: Shard | undefined;
  if (args.shard !== undefined) {
    if (replay !== undefined) usage("--shard does not apply to --replay");
    try {
      shard = parseShard(args.shard);
    } catch (e) {
      usage(`--shard ${e instanceof Error ? e.message : String(e)}`);
    }
    defs = selectShard(defs, shard);
  }
  if (args.list) {
    for (const d of defs) console.log(d.id);
    return;
  }
  libraryPreflight(defs);

  const reportPath = replay === undefined || args.report !== undefined ? args.report ?? DEFAULT_REPORT : null;
  if (reportPath !== null) {
    const problem = unwritable(reportPath);
    if (problem !== null) usage(`--report ${reportPath}: ${problem}`);
  }
  const started = new Date();
  const width = String(defs.length).length;
  console.log(`nl-conformance: ${defs.length} checks, seed ${seed}, profile ${profile}${shard ? `, shard ${shard.index}/${shard.count}` : ""}`);
  const selected = new Set(defs.map((d) => d.id));
  const progress = new Progress(defs);
  // Results by catalogue position: the report lists checks in catalogue order, however they ran.
  const slots: (CheckResult | undefined)[] = new Array(defs.length);
  const position = new Map(defs.map((d, i) => [d.id, i]));
  let finished = 0;
  let stopped = false;
  const record = (r: CheckResult) => {
    if (stopped) return;
    slots[position.get(r.id)!] = r;
    finished++;
    const n = `[${String(finished).padStart(width)}/${defs.length}]`;
    progress.print(`${n} ${r.status.padEnd(7)} ${r.id} (${r.runs} run${r.runs === 1 ? "" : "s"}, ${r.ms.toFixed(0)} ms)`);
    if (r.status !== "pass" && r.status !== "skip" && r.message) console.log(`      ${r.message}\n      replay: ${r.replay}`);
    else if (r.status === "skip") console.log(`      ${r.message ?? ""}`);
    progress.finished(r.id);
  };
  // The delegated checks (kernel children, the cross-check) run in worker threads beside the rest.
  const batches = replay === undefined && parallelEnabled() ? delegatedBatches(defs) : new Map<string, string[]>();
  const inWorker = new Set([...batches.values()].flat());
  const workers = [...batches.values()].map((ids) =>
    runBatchInWorker({ ids, seed, profile, fixtureDirs: args.fixtures ?? [], selected: [...selected], c9SkipReason: c9SkipReason(),
      backendEnv: { NLC_BACKENDS: process.env.NLC_BACKENDS, NLC_PY_BACKENDS: process.env.NLC_PY_BACKENDS } }, record));
  const runInline = async (def: CheckDef) => {
    // Between checks the event loop turns: signal handlers run and workers' results arrive.
    await new Promise((resolve) => setImmediate(resolve));
    if (interruptedBy() !== null) return false;
    if (def.kind === "delegated") progress.clear();
    const r = runCheck(def, { seed, profile, replay: replay && { seed: replay.seed, path: replay.path }, selected });
    if (interruptedBy() !== null) return false;
    record(r);
    return true;
  };
  for (const def of defs) if (!inWorker.has(def.id) && !(await runInline(def))) break;
  const workerBackends: BackendInfo[][] = [];
  let workerInterrupt: InterruptSignal | null = null;
  const settled = Promise.allSettled(workers.map((w) => w.done));
  while (interruptedBy() === null && !(await Promise.race([settled.then(() => true), Bun.sleep(100).then(() => false)]))) { /* wait */ }
  if (interruptedBy() === null) {
    for (const o of await settled) {
      if (o.status === "fulfilled") {
        workerBackends.push(o.value.backends);
        workerInterrupt ??= o.value.interrupt;
      } else console.error(`conformance: ${o.reason instanceof Error ? o.reason.message : String(o.reason)}; its checks run here instead`);
    }
    // What a failed worker did not report runs here, in order.
    if (workerInterrupt === null) for (const [i, def] of defs.entries()) if (slots[i] === undefined && !(await runInline(def))) break;
  }
  stopped = true;
  for (const w of workers) w.stop();
  progress.end();
  const interrupt = interruptedBy() ?? workerInterrupt;
  const results = slots.filter((r): r is CheckResult => r !== undefined);

  const summary = summarize(results);
  const backends = mergeBackendInfo(cat.backends(), workerBackends);
  for (const b of backends) console.log(`backend ${b.name}: ${b.available ? "available" : `unavailable (${b.reason ?? "?"})`}`);
  const run = runInfo(started, seed, profile, filters.join(",") || null, backends, shard);
  if (interrupt !== null) {
    // Never over the complete report: what finished goes beside it, marked partial.
    console.log(`conformance: interrupted by ${interrupt} after ${results.length} of ${defs.length} checks`);
    if (reportPath !== null) {
      const path = partialPath(reportPath);
      writeReport({ format: "nlc-report/1", partial: true, run, summary, checks: results }, path);
      console.log(`partial report: ${path} (${reportPath} is left as it was)`);
    }
    printClosingLine(summary);
    process.exit(signalExitCode(interrupt));
  }
  if (reportPath !== null) {
    writeReport({ format: "nlc-report/1", run, summary, checks: results }, reportPath);
    // A partial report left by an earlier interrupted run no longer describes the latest one.
    rmSync(partialPath(reportPath), { force: true });
    console.log(`report: ${reportPath}`);
  }
  process.exit(printClosingLine(summary) ? 0 : 1);
}

/** Prints the closing line CI reads (vacuous and error count as failed). Returns true when nothing failed. */
function printClosingLine(s: Summary): boolean {
  console.log(closingLine(s));
  return s.fail + s.vacuous + s.error === 0;
}

/** Why a report cannot be written at `path` (checked before the run, so no result is lost), or null. */
function unwritable(path: string): string | null {
  const dir = dirname(resolve(path));
  try {
    mkdirSync(dir, { recursive: true });
    // The report is written as a temp file next to it, then renamed: try exactly that.
    const probe = `${resolve(path)}.${process.pid}.probe`;
    writeFileSync(probe, "");
    unlinkSync(probe);
  } catch (e) {
    return `cannot write into ${dir} (${e instanceof Error ? e.message : String(e)})`;
  }
  return null;
}

function printSummary(path: string): void {
  let report: { summary?: Summary; checks?: unknown[] };
  try {
    report = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    console.error(`conformance: cannot read report ${path}: ${e instanceof Error ? e.message : e}`);
    console.log(NO_REPORT_LINE);
    process.exit(2);
  }
  try {
    validateReport(report);
  } catch (e) {
    console.error(`conformance: ${e instanceof Error ? e.message : e}`);
    console.log(NO_REPORT_LINE);
    process.exit(1);
  }
  process.exit(printClosingLine(report.summary!) && (report.checks?.length ?? 0) > 0 ? 0 : 1);
}

function printCase(ruleKey: string, json: string): void {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (e) {
    usage(`--case: not valid JSON (${e instanceof Error ? e.message : e})`);
  }
  const variant = parseVariantKey(ruleKey);
  let decl;
  try {
    decl = ruleByKey(variant.key);
  } catch (e) {
    usage(`--rule: ${e instanceof Error ? e.message : String(e)}`);
  }
  let req: RuleCaseRequest;
  try {
    req = parseRuleCaseRequest(decl, raw, variant.frozen);
  } catch (e) {
    usage(`--case: ${e instanceof Error ? e.message : String(e)}`);
  }
  const { spec, frozen } = req;
  let doc;
  try {
    const c = buildRuleCase(decl, spec, "f64", frozen);
    doc = ruleFixture({ ...c, frozen }, `${variantKey(decl.key, frozen)}-case-${spec.seed}`, "nl-conformance --case");
  } catch (e) {
    usage(`--case: ${e instanceof Error ? e.message : String(e)}`);
  }
  const text = JSON.stringify(doc, (_k, v) => {
    if (typeof v === "number" && !Number.isFinite(v)) throw new Error(`the case computed a non-finite value (${v})`);
    return v;
  }, 1);
  console.log(text);
}

void main();

/**
 * A library backend (lib:<path>) that cannot be loaded or speaks another ABI version is one usage
 * error, not an error per check (docs/spec/kernel-abi.md#external). Probed in a child process, like
 * every native load.
 */
function libraryPreflight(defs: readonly { id: string; class: string }[]): void {
  const libs = kernelBackendNames().filter((b) => b.startsWith("lib:"));
  if (libs.length === 0 || !defs.some((d) => d.class === "C5")) return;
  const probed = probeBackends();
  for (const name of libs) {
    const p = probed.find((x) => x.info.name === name);
    if (p !== undefined && p.problem === "broken") usage(`--backend ${name}: ${p.info.reason}`);
  }
}
