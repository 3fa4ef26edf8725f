/**
 * Wall time of the default conformance run (`bun run conformance/cli.ts`), measured from outside
 * the process: one warm-up run (kernel builds, disk caches), then N timed runs. Writes nothing
 * besides a throwaway report. Usage: npx bun bench/conformance-wall.ts [--runs N] [-- extra CLI args]
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { baselineMs, timed } from "./baseline.ts";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const own = dash < 0 ? argv : argv.slice(0, dash);
const extra = dash < 0 ? [] : argv.slice(dash + 1);
const runsAt = own.indexOf("--runs");
const runs = runsAt < 0 ? 3 : Number(own[runsAt + 1]);
if (!Number.isInteger(runs) || runs < 1) {
  console.error("conformance-wall: --runs expects a positive integer");
  process.exit(2);
}

const dir = mkdtempSync(join(tmpdir(), "nlc-wall-"));
const report = join(dir, "r.json");
const args = ["run", join(ROOT, "conformance", "cli.ts"), "--report", report, ...extra];

const cpu: number[] = [];
function once(): number {
  rmSync(report, { force: true });
  const r = timed(process.execPath, args, { cwd: ROOT });
  // A run counts only when it finished and wrote its report (exit 0 or 1: checks passed or failed).
  if ((r.status !== 0 && r.status !== 1) || !existsSync(report)) {
    throw new Error(`conformance run exited ${r.status} without a report: ${r.stderr.slice(-600)}`);
  }
  cpu.push(r.cpuMs);
  return r.wallMs;
}

try {
  const warm = once();
  const times: number[] = [];
  const ratios: number[] = [];
  // Each timed run is followed by the fixed baseline workload (bench/baseline.ts): the ratio moves
  // much less with the machine's load than the wall time alone.
  for (let i = 0; i < runs; i++) {
    const ms = once();
    times.push(ms);
    ratios.push(ms / baselineMs());
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  const ratio = ratios.reduce((a, b) => a + b, 0) / ratios.length;
  const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(`first run ${fmt(warm)}; warm runs (${runs}): mean ${fmt(mean)}, min ${fmt(times[0]!)}, max ${fmt(times.at(-1)!)}; ratio to the baseline workload ${ratio.toFixed(2)}; CPU (user + system) per warm run ${fmt(cpu.slice(1).reduce((a, b) => a + b, 0) / runs)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
