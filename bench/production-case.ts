/**
 * One production case judged end to end (docs/spec/conformance.md#production): B = 2, T = 4096,
 * H = 16, d = 128, any rule with a kernel pair (default `delta`; its inputs drawn by the declaration), the pure-f32 cpu build (cpu-f32: f32 storage and sums) — the
 * kernel's forward and backward, ref64, the plain reference's yardstick, the flash-attention bound
 * per tensor and sequence and the bias test per tensor — on two worker threads, one per batch
 * element, in two phases: each runs the kernel on its H sequences (one ABI call of B = 1: the
 * sequences of a batch are independent in the ABI), the second once the first has (their calls'
 * copies would add up in memory); once both have, each judges its sequences one
 * by one, posting a summary per sequence (oracle/sequence-judge.ts); the main thread combines the
 * summaries into the verdict. The phases are timed apart: the kernel phase is the code under test
 * (here emulated on the CPU; on a GPU it is milliseconds), the judging phase is the judge's cost.
 * Prints both phases' wall and CPU time, the peak RSS of the process (both workers included) and
 * the verdict, with a fixed baseline workload timed after it (the machine is shared: wall /
 * baseline moves less with its load); exit status 1 when the verdict is not a pass.
 * `--judge N` judges only the first N sequences of each batch element (the kernel still runs on all
 * H): for a rule whose judge runs its reference pair and ten plain runs (no fast pair), where judging
 * all 2H sequences takes the better part of an hour; the judging CPU is then also printed scaled to
 * the 2H sequences, an estimate, and the verdict says over how many sequences it was reached.
 * Usage: npx bun bench/production-case.ts [--backend cpu-f32|cpu-emu|cpu-bf16] [--rule delta|gated_delta|kda|comba|dplr|gated_delta_product|…]
 *          [--T 4096] [--H 16] [--d 128] [--seed 1] [--judge H]
 */
import { Worker } from "node:worker_threads";
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib, type LibKind } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import { ALPHA_LEVELS, THETA_LEVELS } from "../cases/rule-case.ts";
import { hasFastPair } from "../oracle/matrix-fast.ts";
import { plainOrders, plainRuns } from "../oracle/plain-reference.ts";
import { streamVerdict, type SeqSummary } from "../oracle/sequence-judge.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { baselineMs } from "./baseline.ts";
import type { WorkerJob, WorkerMessage } from "./production-worker.ts";

const argv = process.argv.slice(2);
function arg(name: string, dflt: string): string {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = argv[i + 1];
  if (v === undefined) usage(`--${name} needs a value`);
  return v;
}
function usage(msg: string): never {
  console.error(`production-case: ${msg}\nusage: bun bench/production-case.ts [--backend cpu-f32|cpu-emu|cpu-bf16] [--rule delta|gated_delta|kda|comba|dplr|gated_delta_product|…] [--T N] [--H N] [--d N] [--seed N] [--judge N]`);
  process.exit(2);
}
const KINDS: Record<string, LibKind> = { "cpu-f32": "cpu-f32", "cpu-emu": "cpu", "cpu-bf16": "cpu-bf16" };
const backend = arg("backend", "cpu-f32");
const kind = KINDS[backend] ?? usage(`unknown --backend '${backend}' (known: ${Object.keys(KINDS).join(", ")})`);
const rule = arg("rule", "delta");
try {
  ruleByKey(rule);
} catch (e) {
  usage((e as Error).message);
}
const int = (name: string, dflt: number) => {
  const v = Number(arg(name, String(dflt)));
  if (!Number.isInteger(v) || v < 1) usage(`--${name} must be a positive integer`);
  return v;
};
const B = 2, T = int("T", 4096), H = int("H", 16), d = int("d", 128), seed = int("seed", 1), judged = int("judge", H);
if (judged > H) usage(`--judge ${judged}: at most --H (${H}) sequences per batch element`);
/** The kernel's checkpoint interval (docs/spec/kernel-abi.md#checkpointing). */
const C = 16;

const lib = (await buildLib(kind)).path;
// a rule without a kernel pair in the library has no production case: said up front
{
  const pair = openKernelLib(lib, stateShapesOf).pair(rule);
  if (typeof pair === "string") usage(`--rule ${rule}: no kernel pair in ${backend}, so no production case (${pair})`);
}
const alphas = Object.values(ALPHA_LEVELS), thetas = Object.values(THETA_LEVELS);
/** Sequence n: its own seed, gate levels (the case generator's) and a random initial state. */
const spec = (n: number): WorkerJob["specs"][number] => ({ d, seq_len: T, alpha: alphas[n % alphas.length]!, theta: thetas[n % thetas.length]!, seed: seed * 100_003 + n });

const decl = ruleByKey(rule), accumulate = backend === "cpu-emu" ? "f64" : "f32";
console.log(`production case: rule ${rule}, ${backend}, B = ${B}, T = ${T}, H = ${H}, d = ${d}, seed ${seed}, two workers${judged < H ? `, ${judged} of ${H} sequences judged per batch element` : ""}`);
console.log(`judge: ${hasFastPair(decl) ? "the fast pair" : "the reference pair (no fast pair)"}, ref64 and ${plainOrders(accumulate, plainRuns(decl)).length} plain run(s) per sequence`);
const start = performance.now(), cpu0 = process.cpuUsage();
const summaries: SeqSummary[] = [];
const kernelSeconds: number[] = [];
let refSeconds = 0;
// the judging phase starts when both workers have their kernel outputs
const workers: Worker[] = [];
let kernelsDone = 0, judgeStart = 0, judgeCpu0 = cpu0;
await Promise.all([0, 1].map((b) => new Promise<void>((resolve, reject) => {
  const job: WorkerJob = { lib, rule, b, T, H, d, C, judged, specs: Array.from({ length: H }, (_, h) => spec(b * H + h)) };
  const w = new Worker(new URL("./production-worker.ts", import.meta.url), { workerData: job });
  workers.push(w);
  if (b === 0) w.postMessage("kernel");
  w.on("message", (m: WorkerMessage) => {
    if (m.kind === "kernel") {
      kernelSeconds.push(m.seconds);
      // the batch elements' kernel calls one after the other (their copies would add up in memory)
      if (m.b === 0) workers[1]!.postMessage("kernel");
      if (++kernelsDone === 2) {
        judgeStart = performance.now();
        judgeCpu0 = process.cpuUsage();
        for (const x of workers) x.postMessage("judge");
      }
    } else if (m.kind === "seq") {
      summaries.push(...m.summaries);
      refSeconds += m.seconds;
    } else {
      void w.terminate();
      resolve();
    }
  });
  w.on("error", reject);
})));
const end = performance.now();
const wall = (end - start) / 1000, judgeWall = (end - judgeStart) / 1000, kernelWall = (judgeStart - start) / 1000;
const cpuOf = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
const cpu = cpuOf(process.cpuUsage(cpu0)), judgeCpu = cpuOf(process.cpuUsage(judgeCpu0)), kernelCpu = cpu - judgeCpu;
const base = baselineMs() / 1000;
const v = streamVerdict(summaries, { storage: backend === "cpu-bf16" ? "bf16" : "f32", state: "f32", accumulate });
const rssMB = process.resourceUsage().maxRSS / 1024;

console.log(`kernel phase: wall ${kernelWall.toFixed(1)} s, CPU ${kernelCpu.toFixed(1)} s (the kernel under test on both batch elements: ${kernelSeconds.map((s) => s.toFixed(1)).join(" and ")} s)`);
console.log(`judging phase: wall ${judgeWall.toFixed(1)} s, CPU ${judgeCpu.toFixed(1)} s (ref64, the plain reference, bound and bias test of ${B * judged} sequences; ${refSeconds.toFixed(1)} s summed over both workers)`);
if (judged < H) console.log(`judging all ${B * H} sequences, estimated: CPU ${(judgeCpu * H / judged).toFixed(0)} s, at least ${(judgeCpu * H / judged / 2).toFixed(0)} s wall on two cores (${judged} of ${H} per batch element judged, scaled by ${H / judged})`);
console.log(`end to end: wall ${wall.toFixed(1)} s, CPU ${cpu.toFixed(1)} s (${(cpu / wall).toFixed(2)} cores on average)`);
console.log(`baseline workload ${base.toFixed(2)} s (bench/baseline.ts); judging wall / baseline ${(judgeWall / base).toFixed(1)}, end-to-end wall / baseline ${(wall / base).toFixed(1)}`);
console.log(`peak RSS ${rssMB.toFixed(0)} MB`);
for (const [name, t] of Object.entries(v.tensors)) {
  console.log(`  ${name.padEnd(8)} err ${t.err.toExponential(2)}  plain ${t.plain.toExponential(2)}  bound ${t.bound.toExponential(2)}  err/bound ${t.ratio.toFixed(3)}  slope ${t.slope.toExponential(2)} (threshold ${t.threshold.toExponential(2)})`);
}
if (v.illConditioned.length > 0) console.log(`  not judged, ill-conditioned (docs/spec/precision.md#ill-conditioned): ${v.illConditioned.map((x) => `${x.tensor} (sequence ${x.seq}, plain ${x.plain_rel.toExponential(2)})`).join(", ")}`);
console.log(`verdict${judged < H ? ` over ${B * judged} of ${B * H} sequences` : ""}: ${v.ok ? "pass" : v.vacuous ? "vacuous" : "fail"}${v.message !== undefined ? ` — ${v.message}` : ""}`);
process.exit(v.ok ? 0 : 1);
