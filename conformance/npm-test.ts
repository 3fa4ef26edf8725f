/**
 * `npm test`: `bun test` over the conformance checks (conformance/conformance.test.ts, which runs the
 * CLI's plan with the CLI's parallel runner) and the repository's own tests (tests/), two files at a
 * time, then the closing line of the report as the last line of the log
 * (docs/spec/conformance.md#npm-test).
 *
 * With NLC_SHARD=i/n the conformance checks are sharded by conformance.test.ts itself and the files
 * of tests/ by this script: each shard runs its share, placed longest first on the least-loaded
 * shard by the measured file times in tests/data/test-times.json (refreshed with
 * `NLC_UPDATE_TEST_TIMES=1 npm test`). Arguments go to `bun test` as they are; a file argument
 * replaces the default selection.
 *
 * SIGINT/SIGTERM to this process (npm passes them on: the script is exec'd) reach `bun test`, which
 * stops after the check in flight and writes a partial report; so does the death of this process's
 * parent.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { envOptions } from "../harness/collect.ts";
import { interruptWhenOrphaned, partialPath } from "../harness/interrupt.ts";
import { closingLine, DEFAULT_REPORT, failedPath, isGreen, NO_REPORT_LINE, notRunOf, readReportFile } from "../harness/report.ts";
import type { Shard } from "../harness/shard.ts";
import { INTERRUPT_SIGNALS } from "../oracle/child-signals.ts";
import { ROOT } from "../paths.ts";
import { childEnvironment, environment } from "../environment.ts";

export const CONFORMANCE_TEST = "conformance/conformance.test.ts";
export const TEST_TIMES = join(ROOT, "tests", "data", "test-times.json");
/** A file the table does not know (milliseconds). */
const UNKNOWN_FILE_MS = 5_000;

/** The repository's own test files, relative to the root, sorted. */
export function testFiles(): string[] {
  return readdirSync(join(ROOT, "tests")).filter((f) => f.endsWith(".test.ts")).sort().map((f) => `tests/${f}`);
}

function fileTimes(): Record<string, number> {
  if (!existsSync(TEST_TIMES)) return {};
  return (JSON.parse(readFileSync(TEST_TIMES, "utf8")) as { files?: Record<string, number> }).files ?? {};
}

/** The files of shard `shard`: longest first onto the least-loaded shard (ties: lower index, then name). */
export function shardFiles(files: readonly string[], shard: Shard, times: Record<string, number> = fileTimes()): string[] {
  const load = Array.from({ length: shard.count }, () => 0);
  const mine = new Set<string>();
  const order = [...files].sort((a, b) => (times[b] ?? UNKNOWN_FILE_MS) - (times[a] ?? UNKNOWN_FILE_MS) || (a < b ? -1 : 1));
  for (const f of order) {
    let best = 0;
    for (let s = 1; s < shard.count; s++) if (load[s]! < load[best]!) best = s;
    load[best]! += times[f] ?? UNKNOWN_FILE_MS;
    if (best + 1 === shard.index) mine.add(f);
  }
  return files.filter((f) => mine.has(f));
}

/** The environment variable that hands bun test's -t pattern to conformance/conformance.test.ts. */
export const TEST_NAME_PATTERN_ENV = "NLC_TEST_NAME_PATTERN";

/** The value of -t / --test-name-pattern in bun test's arguments (the last one given), if any. */
export function testNamePattern(args: readonly string[]): string | undefined {
  let out: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if ((a === "-t" || a === "--test-name-pattern") && i + 1 < args.length) out = args[++i];
    else if (a.startsWith("--test-name-pattern=")) out = a.slice("--test-name-pattern=".length);
  }
  return out;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  let opts;
  try {
    opts = envOptions();
  } catch (e) {
    console.error(`npm test: ${e instanceof Error ? e.message : String(e)}`);
    console.log(NO_REPORT_LINE);
    return 2;
  }
  // File or folder arguments (a flag's value, as in `-t NAME`, names no path).
  const named = args.filter((a) => !a.startsWith("-") && existsSync(join(ROOT, a)));
  const tests = opts.shard === undefined ? testFiles() : shardFiles(testFiles(), opts.shard);
  const files = named.length > 0 ? [] : [CONFORMANCE_TEST, ...tests];
  const runsConformance = named.length === 0 || named.some((a) => CONFORMANCE_TEST.includes(a.replace(/^\.\//, "")) || a === "conformance" || a === "conformance/");
  const timing = environment().NLC_UPDATE_TEST_TIMES === "1" ? [`--timings=${relative(process.cwd(), TEST_TIMES)}`, "--update-timings"] : [];
  // bun test's name filter (-t / --test-name-pattern) also selects the conformance checks by id,
  // so `npm test -- -t layering` does not run the whole catalogue for one test of tests/.
  const pattern = testNamePattern(args);
  if (pattern !== undefined) {
    try {
      new RegExp(pattern);
    } catch (e) {
      console.error(`npm test: -t ${pattern}: not a regular expression (${e instanceof Error ? e.message : String(e)})`);
      console.log(NO_REPORT_LINE);
      return 2;
    }
  }
  const started = Date.now();
  // Its own process group, so a signal reaches bun test's worker processes too.
  // bunfig.toml's timeout does not reach --parallel workers: the same hang guard, given here.
  const child = spawn(process.execPath, ["test", "--parallel=2", "--timeout=600000", ...timing, ...files, ...args], {
    cwd: ROOT, stdio: "inherit", detached: true,
    env: childEnvironment(pattern === undefined ? {} : { NLC_TEST_NAME_PATTERN: pattern }),
  });
  let signalled: NodeJS.Signals | null = null;
  const pass = (sig: NodeJS.Signals) => {
    signalled ??= sig;
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // the group is gone
    }
  };
  for (const sig of INTERRUPT_SIGNALS) process.on(sig, () => pass(sig));
  interruptWhenOrphaned(() => pass("SIGTERM"));
  const code = await new Promise<number>((resolve) => {
    child.on("exit", (c, sig) => resolve(c ?? 128 + (sig !== null ? constants.signals[sig] ?? 0 : 0)));
    child.on("error", (e) => {
      console.error(`npm test: cannot start bun test: ${e.message}`);
      resolve(1);
    });
  });
  if (!runsConformance) return code;

  // The closing line, last: from this run's report (or its partial report, or the report of a
  // failed run written beside one that passed).
  const report = opts.report ?? DEFAULT_REPORT;
  const fresh = [report, partialPath(report), failedPath(report)].filter((p) => existsSync(p) && statSync(p).mtimeMs >= started).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  if (fresh === undefined && pattern !== undefined && code === 0) {
    // -t selected no conformance check: nothing was judged, and the line says so.
    console.log(`\nconformance: no check matches -t ${pattern}; none was run`);
    return 0;
  }
  if (fresh === undefined) {
    console.log(NO_REPORT_LINE);
    return code === 0 ? 1 : code;
  }
  const r = readReportFile(fresh);
  // A backend that could not run (g++ or PyTorch missing, no GPU) is said before the closing line.
  const unavailable = r.run.backends.filter((b) => !b.available && !/^not (probed|run)/.test(b.reason ?? ""));
  console.log("");
  for (const b of unavailable) console.log(`backend ${b.name}: unavailable (${b.reason ?? "?"})`);
  console.log(closingLine(r.summary, notRunOf(r)));
  if (signalled !== null) return signalled === "SIGINT" ? 130 : 143;
  // bun test does not apply the nothing-ran rule (docs/spec/conformance.md#nothing-ran): skips alone pass here
  return code !== 0 ? code : isGreen(r, true) ? 0 : 1;
}

if (import.meta.main) process.exit(await main());
