/**
 * A fixed baseline workload for wall-clock benchmarks on a shared machine: a new Bun process that
 * starts, imports nothing of ours and runs a fixed single-threaded floating-point loop (about a
 * second on an idle 2-core machine). A benchmark times it in the same run as what it measures and
 * reports both the absolute wall time and the ratio to this baseline, which moves much less with
 * the machine's load and speed than either alone.
 */
import { spawnSync } from "node:child_process";

const WORKLOAD = `
let s = 0;
for (let i = 1; i <= 60_000_000; i++) s += Math.sqrt(i) / (1 + (i & 7));
if (!(s > 0)) process.exit(1);
`;

/** Wall milliseconds of one baseline run. */
export function baselineMs(): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["-e", WORKLOAD], { stdio: "ignore" });
  if (r.status !== 0) throw new Error(`the baseline workload exited ${r.status}`);
  return performance.now() - t0;
}

export const fmtSeconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
