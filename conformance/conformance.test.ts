/**
 * `bun test` entry: the same plan, runner and report as `npm run conformance`
 * (docs/spec/conformance.md#one-scheduler), with its settings from the environment (NLC_SEED,
 * NLC_PROFILE, NLC_FILTER, NLC_SHARD, NLC_REPORT, NLC_FIXTURES, NLC_BACKENDS, NLC_PY_BACKENDS,
 * NLC_MIN_POWER).
 * The checks run first, in parallel like the CLI's; then each is registered as a test with its
 * real outcome: a skip (decided before or during the run) is `test.skip`, so `bun test` and its
 * JUnit output count it as skipped; a check that is not `pass` or `skip` fails its test with the
 * check's message and replay command. A filter that matches no check, or any other unusable
 * setting, fails this file before a check runs.
 */
import { afterAll, test } from "bun:test";
import { envOptions } from "../harness/collect.ts";
import { DEFAULT_REPORT } from "../harness/report.ts";
import { blindSpotsOf, DEFAULT_MIN_POWER, parseMinPower } from "../harness/report-power.ts";
import { catchInterrupts, interruptWhenOrphaned } from "../harness/interrupt.ts";
import { printable, Progress } from "../harness/progress.ts";
import { runPlan } from "./parallel.ts";
import { byTestName, ENV_NAMES, preflightBackends, planRun, type RunPlan } from "./plan.ts";
import { undeclaredLines, writeRunReport } from "./run-report.ts";
import { isUndeclared } from "../harness/check.ts";
import { environment } from "../environment.ts";

const opts = envOptions();
const planned = planRun({
  seed: opts.seed, profile: opts.profile, filters: opts.filters, fixtureDirs: opts.fixtureDirs, shard: opts.shard,
  reportPath: opts.report ?? DEFAULT_REPORT, names: ENV_NAMES,
  minPower: environment().NLC_MIN_POWER === undefined ? DEFAULT_MIN_POWER : parseMinPower(environment().NLC_MIN_POWER!, "NLC_MIN_POWER"),
});
// `npm test -- -t PATTERN` (conformance/npm-test.ts hands the pattern over): only the checks whose
// test would match run, as bun test would run only those tests.
const namePattern = environment().NLC_TEST_NAME_PATTERN;
const plan = namePattern === undefined ? planned : byTestName(planned, new RegExp(namePattern));
preflightBackends(plan);

if (plan.defs.length === 0) {
  // -t matched no check: no run, no report (npm test says so), and no test of this file.
  console.error(`nl-conformance: no check matches -t ${namePattern}`);
} else {
  await runAndRegister(plan);
}

/** Runs the plan, writes the report and registers one test per check. */
async function runAndRegister(plan: RunPlan): Promise<void> {
  // SIGINT/SIGTERM (or the death of the process that started this one) stop the run after the
  // check in flight; what finished is written as a partial report, the complete one left as it was.
  const uncatch = catchInterrupts();
  const unwatch = interruptWhenOrphaned();
  const started = new Date();
  const shard = opts.shard;
  console.error(`nl-conformance: ${plan.defs.length} checks, seed ${opts.seed}, profile ${opts.profile}${shard ? `, shard ${shard.index}/${shard.count}` : ""}`);
  const progress = new Progress(plan.defs);
  const outcome = await runPlan(plan, { onResult: (r) => progress.finished(r.id), beforeDelegated: () => progress.clear() });
  progress.end();
  // The other test files this process may run next end on a signal as usual.
  uncatch();
  unwatch();
  const written = writeRunReport(plan, outcome, started, (s) => console.error(s));
  for (const line of undeclaredLines(outcome.results)) console.error(line);

  const byId = new Map(outcome.results.map((r) => [r.id, r]));
  for (const def of plan.defs) {
    const r = byId.get(def.id);
    if (r !== undefined && isUndeclared(r)) continue; // a rule its kernel does not implement: no check of the run
    if (r === undefined) {
      test(def.id, () => {
        throw new Error(`${def.id}: not run: the run was interrupted by ${outcome.interrupt}`);
      });
    } else if (r.status === "skip") {
      test.skip(`${def.id} (skip: ${printable(r.message ?? "").split("\n")[0]!.slice(0, 200)})`, () => {});
    } else {
      // a pass with a blind spot is flagged in its name, which the JUnit output keeps (docs/spec/conformance.md#signatures)
      const blind = r.status === "pass" ? blindSpotsOf(r) : [];
      const name = blind.length === 0 ? def.id : `${def.id} (pass with blind spot: ${printable(blind.map((b) => b.split(":")[0]).join(", "))})`;
      test(name, () => {
        if (r.status !== "pass") throw new Error(`${r.id}: ${r.status}: ${printable(r.message ?? "")}\n  replay: ${r.replay}`);
      });
    }
  }

  afterAll(() => {
    // `npm test` prints this line again after bun's own summary (conformance/npm-test.ts), as the last line.
    console.log(`\n${written.line}${written.path !== null ? `\nreport: ${written.path}` : ""}`);
  });
}
