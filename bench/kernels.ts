/**
 * Kernel benchmarks (tinybench):
 *   - bun:ffi overhead per call: nlk_abi_version(), a no-op (target < 100 ns), next to a plain JS call;
 *   - per rule, the cpu-emu call time of forward and backward (and of the frozen read) at
 *     B = 4, T = 64, d = 32, and the part of it spent in kernels (nlk_last_kernel_ms);
 *   - with --backend cuda (or lib:<path>) on a machine with a GPU: kernel time per rule at B = 16,
 *     T = 256, d ∈ {64, 128, 256}, and the fraction of the card's peak memory bandwidth reached by the
 *     compulsory traffic (every input read once, every output written once). Written to
 *     reports/gpu/kernels-<device>.json.
 * Usage: bun bench/kernels.ts [--quick] [--backend cpu-emu|cuda|lib:<path>]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Bench } from "tinybench";
import { inputShape, type InnerInputName } from "../ffi/abi.ts";
import { resolveBackend } from "../ffi/backends.ts";
import { argSizes, type Arrays, type KernelLib, type RulePair } from "../ffi/lib.ts";
import { ROOT } from "../paths.ts";
import { withDefaults } from "../src/rules/level.ts";
import { RULES } from "../src/rules/index.ts";
import type { RuleConfig, RuleDecl } from "../src/rules/types.ts";
import { Rng } from "../src/rng.ts";

const quick = process.argv.includes("--quick");
const TIME = quick ? 100 : 400;
const backendArg = (() => {
  const i = process.argv.indexOf("--backend");
  return i >= 0 ? process.argv[i + 1]! : "cpu-emu";
})();

async function latency(name: string, fn: () => void, time = TIME): Promise<{ mean: number; p99: number; samples: number }> {
  const b = new Bench({ time, warmupTime: Math.min(time, 100) });
  b.add(name, fn);
  await b.run();
  const r = b.tasks[0]!.result;
  if (r.state !== "completed") throw new Error(`benchmark ${name}: ${r.state}`);
  return { mean: r.latency.mean, p99: r.latency.p99, samples: r.latency.samplesCount };
}

const GATE_RANGE: Record<string, [number, number]> = { alpha: [0.05, 0.5], theta: [0.05, 0.5], eta: [0.5, 0.9] };

/** Synthetic but well-scaled inputs: the benchmark measures time, the checks measure correctness. */
function inputs(decl: RuleDecl, pair: RulePair, cfg: RuleConfig, B: number, rng: Rng): { inp: Arrays; state: Arrays; dy: Float32Array } {
  const fill = (n: number, lo: number, hi: number) => Float32Array.from({ length: n }, () => rng.uniform(lo, hi));
  const inp: Arrays = {};
  const r = 1 / Math.sqrt(cfg.d);
  for (const n of pair.abi.inputs as readonly InnerInputName[]) {
    const size = B * inputShape(n, cfg).reduce((a, b) => a * b, 1);
    const [lo, hi] = GATE_RANGE[n] ?? [-r, r];
    inp[n] = fill(size, lo, hi);
  }
  const state: Arrays = {};
  for (let b = 0; b < B; b++) {
    const st = decl.randomState(cfg, "f32", () => rng.next());
    for (const n of pair.abi.state) {
      const one = st[n]!.data as Float32Array;
      state[n] ??= new Float32Array(B * one.length);
      state[n]!.set(one, b * one.length);
    }
  }
  return { inp, state, dy: fill(B * cfg.seq_len * cfg.d, -1, 1) };
}

function config(decl: RuleDecl, d: number, s: number): RuleConfig {
  const extra: Record<string, number> = decl.key === "swa" ? { heads: 4, window: 16 } : {};
  return withDefaults(decl, { d, seq_len: s, ...extra });
}

interface Row {
  rule: string;
  fn: string;
  d: number;
  call_ms: number;
  kernel_ms: number;
  bytes?: number;
  gbps?: number;
  peak_fraction?: number;
}

/** Compulsory bytes of one call: every pointer argument once (f32). */
function trafficBytes(pair: RulePair, fn: "forward" | "backward" | "frozen_forward" | "frozen_backward", cfg: RuleConfig, B: number): number {
  const sizes = argSizes(pair.abi, fn, cfg, RULES.find((r) => r.key === pair.abi.rule)!.stateShapes(cfg));
  const a = pair.abi;
  const saved = a.saved.map((t) => t.name);
  const names = fn === "forward" ? [...a.inputs, ...a.state.map((n) => `${n}_0`), "y", ...a.state, ...saved]
    : fn === "backward" ? [...a.inputs, ...saved, "dy", ...a.grads]
    : fn === "frozen_forward" ? ["q", ...a.frozen!.state, "y", ...a.frozen!.saved.map((t) => t.name)]
    : ["q", ...a.frozen!.state, ...a.frozen!.saved.map((t) => t.name), "dy", "dq"];
  return names.reduce((s, n) => s + 4 * B * (sizes[n] ?? 0), 0);
}

async function ruleRows(lib: KernelLib, B: number, s: number, d: number, time: number, peak: number): Promise<Row[]> {
  const rows: Row[] = [];
  const rng = new Rng(11);
  for (const decl of RULES) {
    const pair = lib.pair(decl.key);
    if (typeof pair === "string") {
      console.log(`  ${decl.key}: ${pair}`);
      continue;
    }
    const cfg = config(decl, d, s);
    const { inp, state, dy } = inputs(decl, pair, cfg, B, rng);
    const f = pair.forward(cfg, B, inp, state);
    const measure = async (fn: Row["fn"], call: () => void) => {
      let kernelSum = 0, n = 0;
      const t = await latency(`${decl.key} ${fn}`, () => {
        call();
        kernelSum += lib.lastKernelMs();
        n++;
      }, time);
      const kernel = kernelSum / n;
      const row: Row = { rule: decl.key, fn, d, call_ms: t.mean, kernel_ms: kernel };
      if (peak > 0) {
        row.bytes = trafficBytes(pair, fn as "forward", cfg, B);
        row.gbps = row.bytes / (kernel * 1e-3) / 1e9;
        row.peak_fraction = row.gbps / peak;
      }
      rows.push(row);
    };
    await measure("forward", () => void pair.forward(cfg, B, inp, state));
    await measure("backward", () => void pair.backward(cfg, B, inp, f.saved, dy));
    if (pair.frozen !== null) {
      const fz = pair.frozen;
      const st: Arrays = {};
      for (const n of pair.abi.frozen!.state) st[n] = state[n]!;
      const r = fz.forward(cfg, B, inp.q!, st);
      await measure("frozen_forward", () => void fz.forward(cfg, B, inp.q!, st));
      await measure("frozen_backward", () => void fz.backward(cfg, B, inp.q!, st, r.saved, dy));
    }
  }
  return rows;
}

function table(rows: Row[]): void {
  const head = ["rule", "fn", "d", "call ms", "kernel ms", ...(rows.some((r) => r.gbps !== undefined) ? ["GB/s", "of peak"] : [])];
  console.log(head.map((h, i) => (i < 2 ? h.padEnd(16) : h.padStart(10))).join(" "));
  for (const r of rows) {
    const cells = [r.rule.padEnd(16), r.fn.padEnd(16), String(r.d).padStart(10), r.call_ms.toFixed(3).padStart(10), r.kernel_ms.toFixed(3).padStart(10)];
    if (r.gbps !== undefined) cells.push(r.gbps.toFixed(1).padStart(10), `${(100 * r.peak_fraction!).toFixed(1)}%`.padStart(10));
    console.log(cells.join(" "));
  }
}

async function main(): Promise<void> {
  const resolved = await resolveBackend(backendArg, (m) => console.error(m));
  if (resolved.lib === undefined) {
    console.log(`backend ${backendArg} unavailable: ${resolved.info.reason}`);
    process.exit(backendArg === "cpu-emu" ? 1 : 0);
  }
  const lib = resolved.lib;
  console.log(`backend ${backendArg}: ${resolved.info.device}`);

  // (1) bun:ffi overhead: 1000 calls per sample, so tinybench's own per-sample cost drops out
  const noop = lib.abiVersion;
  const jsFn = (() => 1) as () => number;
  const REPS = 1000;
  let sink = 0;
  const ffi = await latency("ffi no-op", () => {
    for (let i = 0; i < REPS; i++) sink += noop();
  });
  const js = await latency("js no-op", () => {
    for (let i = 0; i < REPS; i++) sink += jsFn();
  });
  if (sink === 0) throw new Error("unreachable");
  const ffiNs = (ffi.mean * 1e6) / REPS, jsNs = (js.mean * 1e6) / REPS;
  console.log(`\nbun:ffi no-op (nlk_abi_version): ${ffiNs.toFixed(1)} ns/call (JS function: ${jsNs.toFixed(1)} ns; target < 100 ns)\n`);

  const out: Record<string, unknown> = { backend: backendArg, device: resolved.info.device, ffi_noop_ns: ffiNs, js_noop_ns: jsNs };
  if (lib.backend === "cpu-emu") {
    const B = 4, s = 64, d = 32;
    console.log(`cpu-emu call time per rule (B = ${B}, T = ${s}, d = ${d}; call = copies + launch + kernels)`);
    const rows = await ruleRows(lib, B, s, d, quick ? 100 : 300, 0);
    table(rows);
    out.cpu_emu = { B, T: s, d, rows };
    mkdirSync(join(ROOT, "reports"), { recursive: true });
    writeFileSync(join(ROOT, "reports", "bench-kernels.json"), JSON.stringify(out, null, 2) + "\n");
    console.log("\nwrote reports/bench-kernels.json");
    return;
  }
  const peak = lib.peakGbps();
  const B = 16, s = 256;
  console.log(`GPU kernel time (B = ${B}, T = ${s}); peak memory bandwidth ${peak.toFixed(0)} GB/s`);
  const rows: Row[] = [];
  for (const d of [64, 128, 256]) rows.push(...(await ruleRows(lib, B, s, d, quick ? 200 : 500, peak)));
  table(rows);
  out.gpu = { B, T: s, peak_gbps: peak, rows };
  const dir = join(ROOT, "reports", "gpu");
  mkdirSync(dir, { recursive: true });
  const name = String(resolved.info.device ?? "gpu").split(" (")[0]!.replace(/[^A-Za-z0-9_.-]+/g, "-");
  writeFileSync(join(dir, `kernels-${name}.json`), JSON.stringify(out, null, 2) + "\n");
  console.log(`\nwrote reports/gpu/kernels-${name}.json`);
}

await main();
