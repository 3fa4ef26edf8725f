/**
 * A fixed baseline workload for wall-clock benchmarks on a shared machine: a new Bun process that
 * starts, imports nothing of ours and runs a fixed single-threaded floating-point loop (0.28–0.33 s
 * on the reference machine, idle). A benchmark times it in the same run as what it measures and
 * reports both the absolute wall time and the ratio to this baseline, which moves much less with
 * the machine's load and speed than either alone.
 */
import { spawnSync } from "node:child_process";
import { childEnvironment } from "../environment.ts";

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

/**
 * Runs a command and returns its wall and CPU milliseconds (user + system of the process and every
 * descendant it waited for, from getrusage through /usr/bin/time). On a loaded shared machine the
 * CPU time moves much less than the wall time.
 */
export function timed(cmd: string, args: readonly string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): { wallMs: number; cpuMs: number; status: number | null; stderr: string } {
  const t0 = performance.now();
  const r = spawnSync("/usr/bin/time", ["-f", "NLC-CPU %U %S", cmd, ...args], { cwd: opts.cwd, env: opts.env ?? childEnvironment(), stdio: ["ignore", "ignore", "pipe"], maxBuffer: 256 << 20 });
  const wallMs = performance.now() - t0;
  const err = r.stderr?.toString() ?? "";
  const m = /NLC-CPU ([\d.]+) ([\d.]+)\s*$/.exec(err);
  return { wallMs, cpuMs: m ? (Number(m[1]) + Number(m[2])) * 1000 : NaN, status: r.status, stderr: err };
}
