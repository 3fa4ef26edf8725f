/**
 * The command line of `npm run conformance` (entry: conformance/cli.ts): runs the conformance
 * catalogue and writes the JSON report, or one of the subcommands. The same engine serves
 * `bun test` (conformance/conformance.test.ts).
 */
import { parseVariantKey, variantKey } from "../src/rules/level.ts";
import { runSelftest, SELFTEST_HELP } from "./selftest.ts";
import { blindSpotsOf } from "../harness/report-power.ts";
import { buildRuleCase, parseRuleCaseRequest, type RuleCaseRequest } from "../cases/rule-case.ts";
import { DEFAULT_SEED } from "../harness/collect.ts";
import { closingLine, isGreen, NO_REPORT_LINE, notRunOf, readReportFile, type Report } from "../harness/report.ts";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { CaseDump } from "../harness/dump.ts";
import { dirname, join, resolve } from "node:path";
import { catchInterrupts, interruptWhenOrphaned, signalExitCode } from "../harness/interrupt.ts";
import { runsChecks } from "./supervise.ts";
import { printable, Progress } from "../harness/progress.ts";
import { runPlan } from "./parallel.ts";
import { REPORT_COMMANDS, REPORT_COMMANDS_HELP, runReportCommand, type ReportCommand } from "./report-commands.ts";
import { SWEEP_COMMANDS, SWEEP_HELP, runSweepCommand, type SweepCommand } from "./sweep.ts";
import { ruleFixture } from "../cases/fixtures/rule-fixture.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { preflightBackends, planRun, UsageError, type RunPlan, type RunRequest } from "./plan.ts";
import { nothingRan, undeclaredLines, writeRunReport } from "./run-report.ts";
import { isUndeclared } from "../harness/check.ts";
import { CONFIG_FILE, DEFAULT_REPORT_REL, defaultReport, parseCommandLine, runSettings, type Args } from "./settings.ts";

const HELP = `usage: npx nlc [options]                  (installed: npm i -D <nl-conformance tarball or git URL>)
       npm run conformance -- [options]     (in this repository; or: bun run conformance [options])
       ... diff OLD NEW | html REPORT [--out FILE] | merge A B ... --out FILE | timings REPORT
           | junit REPORT [--out FILE] | markdown REPORT [--out FILE] | sweep ... | sweep-merge ...

Runs the nl-conformance checks (classes C0-C9) and writes an nlc-report/1 JSON report. Every
path (py: and lib: modules, --report, --fixtures, --summary, --config) is relative to the
directory the command runs in; with no options a run reads ${CONFIG_FILE} there, if present.

  --config FILE    the settings file (default ./${CONFIG_FILE} when it exists): backends,
                   profile, seed, filter, rule, min-power, report, fixtures, require,
                   allow-skipped (schema conformance/data/nlc-config.schema.json); an
                   option given on the command line overrides the file's
  --filter F       run checks matching F: a class (C2, exactly: not C20), a rule (moneta,
                   moneta.frozen), or any substring of a check id; repeatable, or comma-separated
  --rule KEY       only the checks of rule KEY (delta, or a variant: delta.frozen); with
                   --filter, the checks matching both (with --case: the rule of the case)
  --seed N         run seed (default ${DEFAULT_SEED}); the same seed gives the same report
  --profile P      quick | default | deep | regime: property runs per check (default:
                   default); regime: one batch of every shape regime per case
                   (docs/spec/conformance.md#regime)
  --report PATH    where to write the report (default ${DEFAULT_REPORT_REL} under the
                   directory the command runs in); a run that does not pass never
                   replaces a report that passed: it is written beside it as
                   <name>.failed.json
  --allow-skipped  a run that tests nothing (every check skipped, a named backend that
                   ran no check, a required check that did not pass) is not a failure
  --replay R       re-run one case exactly: R = <check id>:<seed>:<path>, as printed
                   in a report's "replay" field
  --fixtures DIR   also replay the nlc-fixture/1 files in DIR (C6); repeatable
  --backend B      kernel backend for C5: cpu-emu, cuda, the pure-f32 builds cpu-f32 and
                   cuda-f32, the bf16-storage builds cpu-bf16 and cuda-bf16, or lib:<path>[@<name>] (a library implementing
                   ffi/nlk.h, its checks C5/lib-<file>/... or C5/lib-<name>/...);
                   repeatable; default cpu-emu and cuda; a run naming only lib: and py:
                   backends runs their checks, not the suite's own;
                   or py:<module>:<callable>, a PyTorch/Triton kernel pair (module: a
                   dotted name, or a path to a .py file; docs/spec/py-backend.md), its
                   checks C5/py-<callable>/...; py:<module>:<callable>@<name> names them
                   C5/py-<name>/... instead
  --case JSON      with --rule: print one rule case (inputs, outputs, gradients) as an
                   nlc-fixture/1 document, e.g.
                   --rule moneta --case '{"d":4,"seq_len":3,"seed":7,"hyper":{"p":3}}'
                   fields: d, seq_len, seed, hyper, frozen, state ("init"|"random"),
                   alpha ("low"|"mid"|"high"), theta ("small"|"large"); stdout holds the
                   document only (through npm: npm run -s conformance -- ...)
  --out FILE       with --case: write the document to FILE instead of stdout
  --dump DIR       with --replay of a py: kernel's failing case: write what the kernel got, what
                   it returned and the references, one .npy per tensor, and DIR/manifest.json;
                   with --case: the case's inputs and the reference's outputs and gradients
  --shard I/N      run only shard I of N (1-based): a deterministic partition of the
                   selected checks balanced by measured check times; merge the shards'
                   reports with the merge command
  --min-power P    fail every passing kernel check whose weakest gradient tensor could not
                   detect a relative scale error of P (1%, 0.01; default off;
                   docs/spec/precision.md#min-power)
  --list           list the check ids and exit
  --summary [PATH] print the closing line of an existing report (default
                   ${DEFAULT_REPORT_REL}) and exit 1 unless it is all pass/skip and
                   something passed (with --allow-skipped: all skipped is accepted)
  -h, --help       this text

Delegated checks (C5 kernel children, the C9 cross-check) run in worker threads beside the
others; NLC_SERIAL=1 runs everything in one thread (the report is the same apart from timings).

Exit status: 0 when every check passed or was skipped and something ran; 1 when any check
failed, was vacuous or errored, or nothing ran (every selected check skipped, a backend named
by --backend or the config that ran no check: docs/spec/conformance.md#nothing-ran); 2 on a
usage error (an unknown option, config key or rule names the nearest known one); 130 (SIGINT)
or 143 (SIGTERM) when interrupted. An interrupted run passes the signal to its child
processes, stops after the check in flight and writes what finished to <report>.partial.json
("partial": true), leaving the report itself as it was; its closing line counts the checks
it did not run as failed. Signal the bun process, the process group (Ctrl-C) or the npm
process of \`npm run\`; a run whose parent died stops the same way. A SIGINT sent to the npx
process alone is held by the shell npm runs the command in (npm passes it to that shell only)
until the run ends: send the npx process SIGTERM, which ends that shell, and the run stops.
A SIGTERM or a second SIGINT ends the child processes in flight (kernels, Python hosts) at
once.

${REPORT_COMMANDS_HELP}

${SWEEP_HELP}

${SELFTEST_HELP}`;

function usage(msg: string): never {
  console.error(`conformance: ${printable(msg)}\n(see --help)`);
  process.exit(2);
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

/**
 * The subcommands besides running checks: a name and what it does with the rest of the command
 * line (its exit status). A new subcommand is one entry here and its help text.
 */
const SUBCOMMANDS: Record<string, (argv: string[]) => number | Promise<number>> = Object.fromEntries([
  ...REPORT_COMMANDS.map((name) => [name, (argv: string[]) => runReportCommand(name as ReportCommand, argv)]),
  ...SWEEP_COMMANDS.map((name) => [name, (argv: string[]) => runSweepCommand(name as SweepCommand, argv)]),
  ["selftest", runSelftest],
]);

/** Each subcommand's part of the help, printed by `<subcommand> --help` (or -h). */
const SUBCOMMAND_HELP: Record<string, string> = Object.fromEntries([
  ...REPORT_COMMANDS.map((name) => [name, REPORT_COMMANDS_HELP]),
  ...SWEEP_COMMANDS.map((name) => [name, SWEEP_HELP]),
  ["selftest", SELFTEST_HELP],
]);

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const sub = SUBCOMMANDS[argv[0] ?? ""];
  if (sub !== undefined) {
    if (argv.slice(1).some((a) => a === "--help" || a === "-h")) {
      console.log(SUBCOMMAND_HELP[argv[0]!]);
      process.exit(0);
    }
    process.exit(await sub(argv.slice(1)));
  }
  if (runsChecks(argv)) {
    catchInterrupts();
    interruptWhenOrphaned();
  }
  let parsed: Args;
  try {
    parsed = parseCommandLine(argv);
  } catch (e) {
    usage(message(e));
  }
  const { values: args, positionals } = parsed;
  if (args.help) {
    console.log(HELP);
    return;
  }
  if (args.summary) {
    // the config's report and allow-skipped count here as in a run
    let settings: RunRequest;
    try {
      settings = runSettings({ config: args.config, "allow-skipped": args["allow-skipped"] });
    } catch (e) {
      usage(message(e));
    }
    printSummary(positionals[0] ?? settings.reportPath ?? defaultReport(), settings.allowSkipped === true);
    return;
  }
  if (positionals.length > 0) usage(`unexpected argument ${positionals[0]}`);
  if (args.out !== undefined && args.case === undefined) usage("--out goes with --case (report commands take their own --out)");
  if (args.dump !== undefined && args.replay === undefined && args.case === undefined) {
    usage("--dump goes with --replay (a failing case's replay line, e.g. --replay C5/py-…/backward:123:0 --dump DIR) or with --rule R --case JSON");
  }
  if (args.case !== undefined) {
    if (args.rule === undefined) usage("--case needs --rule");
    printCase(args.rule, args.case, args.out, args.dump);
    return;
  }

  // Plan: the checks, the backends, the report's path; every usage error before the first check.
  let request: RunRequest;
  let plan: RunPlan;
  try {
    request = runSettings(args);
    plan = planRun(args.list ? { ...request, reportPath: null } : request);
    if (!args.list) preflightBackends(plan);
  } catch (e) {
    if (e instanceof UsageError) usage(e.message);
    throw e;
  }
  if (args.list) {
    for (const d of plan.defs) console.log(d.id);
    return;
  }

  // Run.
  const { defs } = plan;
  const started = new Date();
  const width = String(defs.length).length;
  const shard = request.shard;
  console.log(`nl-conformance: ${defs.length} checks, seed ${request.seed}, profile ${request.profile}${shard ? `, shard ${shard.index}/${shard.count}` : ""}`);
  const progress = new Progress(defs);
  const outcome = await runPlan(plan, {
    onResult: (r, finished, total) => {
      // a rule its kernel does not implement: one line per backend after the run (undeclaredLines)
      if (isUndeclared(r)) return progress.finished(r.id);
      const n = `[${String(finished).padStart(width)}/${total}]`;
      progress.print(`${n} ${r.status.padEnd(7)} ${r.id} (${r.runs} run${r.runs === 1 ? "" : "s"}, ${r.ms.toFixed(0)} ms)`);
      if (r.status !== "pass" && r.status !== "skip" && r.message) console.log(`      ${printable(r.message)}\n      replay: ${r.replay}`);
      else if (r.status === "skip") console.log(`      ${printable(r.message ?? "")}`);
      else for (const b of blindSpotsOf(r)) console.log(`      blind spot: ${printable(b)}`);
      progress.finished(r.id);
    },
    beforeDelegated: () => progress.clear(),
  });
  progress.end();

  // Report.
  for (const b of outcome.backends) console.log(`backend ${b.name}: ${b.available ? "available" : `unavailable (${b.reason ?? "?"})`}`);
  for (const line of undeclaredLines(outcome.results)) console.log(printable(line));
  const empty = nothingRan(plan, outcome);
  for (const why of empty) console.log(`conformance: ${printable(why)}`);
  if (empty.some((why) => why.startsWith("nothing ran"))) console.log("conformance: a run that tests nothing fails (--allow-skipped, or \"allow-skipped\": true in the config, accepts it)");
  const written = writeRunReport(plan, outcome, started, console.log, empty);
  const dump = request.replay?.dump;
  if (dump !== undefined) {
    console.log(existsSync(join(dump, "manifest.json")) ? `dump: ${join(dump, "manifest.json")}`
      : `dump: nothing written to ${dump}: --dump covers the cases of py: kernel checks (docs/spec/conformance.md#dump)`);
  }
  console.log(written.line);
  process.exit(outcome.interrupt !== null ? signalExitCode(outcome.interrupt) : written.green ? 0 : 1);
}

/** --summary: the closing line of a finished report; exit 0 only when it is complete and green. */
function printSummary(path: string, allowSkipped: boolean): void {
  let report: Report;
  try {
    report = readReportFile(path);
  } catch (e) {
    console.error(`conformance: cannot read report ${message(e)}`);
    console.log(NO_REPORT_LINE);
    process.exit(existsSync(path) ? 1 : 2);
  }
  if (report.partial === true) console.error(`conformance: ${path} is the partial report of an interrupted run`);
  const allSkipped = report.checks.length > 0 && report.checks.every((c) => c.status === "skip");
  if (allSkipped && !allowSkipped) console.error(`conformance: nothing ran: every check of ${path} (${report.checks.length}) was skipped (--allow-skipped accepts it)`);
  console.log(closingLine(report.summary, notRunOf(report)));
  process.exit(isGreen(report, allowSkipped) ? 0 : 1);
}

/**
 * --case: the nlc-fixture/1 document alone on stdout (npm prints its banner there too: use
 * `npm run -s conformance -- ...`, or --out FILE, which writes the document and nothing else).
 */
function printCase(ruleKey: string, json: string, out: string | undefined, dumpDir?: string): void {
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
  if (dumpDir !== undefined) {
    // the same tensors as .npy files: inputs/X.npy, inputs/params/W_K.npy, expected/grads/W_K.npy, ...
    const dump = new CaseDump(resolve(dumpDir));
    const walk = (node: unknown, at: string, what: string): void => {
      if (typeof node !== "object" || node === null) return;
      const t = node as { shape?: unknown; data?: unknown };
      if (Array.isArray(t.shape) && Array.isArray(t.data)) {
        dump.tensor(`${at}.npy`, t.shape as number[], t.data as number[], `${what} ${at.split("/").slice(1).join(" ")}`);
        return;
      }
      for (const [k, v] of Object.entries(node)) walk(v, `${at}/${k}`, what);
    };
    const d = doc as { inputs: unknown; expected: unknown };
    walk(d.inputs, "inputs", "the case's input");
    walk(d.expected, "expected", "the reference's output or gradient");
    console.error(`dump: ${dump.finish({ case: req, rule: ruleKey, names: "inputs/ and expected/: the nlc-fixture/1 document's tensors (docs/spec/conformance.md#dump)" })}`);
  }
  if (out === undefined) {
    console.log(text);
    return;
  }
  try {
    mkdirSync(dirname(resolve(out)), { recursive: true });
    writeFileSync(out, text + "\n");
  } catch (e) {
    usage(`--out ${out}: ${message(e)}`);
  }
  console.error(`case: ${out}`);
}

void main();

