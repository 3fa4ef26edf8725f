/**
 * Kernel benchmarks on ABI v2 (tinybench), every row printed as soon as it is measured:
 *   - bun:ffi overhead per call: nlk_abi_version(), a no-op, next to a plain JS call;
 *   - per ported pair (and frozen read), at B = 16, T = 256, H = 4, d ∈ {64, 128}, C ∈ {1, 16}:
 *     kernel time (nlk_last_kernel_ms), call time seen from Bun (inputs already in library memory:
 *     no copies), workspace bytes, and the bandwidth of the compulsory traffic (every input and
 *     state read once, every output written once, the workspace written once by the forward and
 *     read once by the backward) over the kernel time, with its fraction of the device's peak.
 *   --small: B = 2, T = 32, H = 2, d ∈ {16, 32} (for the CPU emulation).
 * Writes reports/bench-kernels-<backend>.json.
 * Usage: npx bun bench/kernels.ts [--small] [--quick] [--backend cpu-emu|cuda|lib:<path>]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Bench } from "tinybench";
import { tokenElems, type Shape } from "../ffi/abi.ts";
import { backendSlug, resolveBackend } from "../ffi/backends.ts";
import type { KernelLib, Pointers } from "../ffi/lib-types.ts";
import { ROOT } from "../paths.ts";
import { withDefaults } from "../src/rules/level.ts";
import { RULES } from "../src/rules/index.ts";
import type { RuleConfig, RuleDecl } from "../src/rules/types.ts";
import { Rng } from "../src/rng.ts";

const argv = process.argv.slice(2);
const small = argv.includes("--small");
const TIME = argv.includes("--quick") ? 100 : 300;
const backendArg = (() => {
  const i = argv.indexOf("--backend");
  return i >= 0 ? argv[i + 1]! : "cpu-emu";
})();
const SIZES = small ? { B: 2, T: 32, H: 2, ds: [16, 32] } : { B: 16, T: 256, H: 4, ds: [64, 128] };
const CS = [1, 16];

async function latency(fn: () => void, time = TIME): Promise<number> {
  const b = new Bench({ time, warmupTime: Math.min(time, 100), iterations: 3 });
  b.add("x", fn);
  await b.run();
  const r = b.tasks[0]!.result;
  if (r.state !== "completed") throw new Error(`benchmark: ${r.state}`);
  return r.latency.mean;
}

const GATE_RANGE: Record<string, [number, number]> = { alpha: [0.05, 0.5], theta: [0.05, 0.5], eta: [0.5, 0.9] };

interface Row {
  rule: string;
  fn: string;
  d: number;
  C: number | null;
  kernel_ms: number;
  call_ms: number;
  workspace_bytes: number;
  traffic_bytes: number;
  gbps: number;
  peak_fraction: number | null;
}

const HEAD = ["rule", "fn", "d", "C", "kernel ms", "call ms", "workspace", "GB/s", "of peak"];
function printRow(r: Row): void {
  const cells = [r.rule.padEnd(9), r.fn.padEnd(16), String(r.d).padStart(4), String(r.C ?? "-").padStart(3), r.kernel_ms.toFixed(3).padStart(10),
    r.call_ms.toFixed(3).padStart(10), `${(r.workspace_bytes / 2 ** 20).toFixed(2)} MiB`.padStart(12), r.gbps.toFixed(1).padStart(8),
    (r.peak_fraction === null ? "-" : `${(100 * r.peak_fraction).toFixed(1)}%`).padStart(8)];
  console.log(cells.join(" "));
}

/** Library memory for the named tensors (random values), freed by `free`. */
function place(lib: KernelLib, sizes: Record<string, number>, rng: Rng, d: number): { ptrs: Pointers; bytes: Record<string, number>; free(): void } {
  const ptrs: Pointers = {}, bytes: Record<string, number> = {};
  const r = 1 / Math.sqrt(d);
  for (const [name, n] of Object.entries(sizes)) {
    const [lo, hi] = GATE_RANGE[name] ?? [-r, r];
    ptrs[name] = lib.memory.upload(Float32Array.from({ length: n }, () => rng.uniform(lo, hi)));
    bytes[name] = 4 * n;
  }
  return { ptrs, bytes, free: () => { for (const p of Object.values(ptrs)) lib.memory.free(p); } };
}

async function measure(lib: KernelLib, call: () => void): Promise<{ kernel: number; callMs: number }> {
  let kernelSum = 0, n = 0;
  const callMs = await latency(() => {
    call();
    kernelSum += lib.lastKernelMs();
    n++;
  });
  return { kernel: kernelSum / n, callMs };
}

async function ruleRows(lib: KernelLib, decl: RuleDecl, peak: number, rows: Row[]): Promise<void> {
  const rng = new Rng(11);
  const { B, T, H } = SIZES;
  for (const d of SIZES.ds) {
    const cfg: RuleConfig = withDefaults(decl, { d, seq_len: T });
    const shape: Shape = { B, T, H, d };
    const stShapes = decl.stateShapes(cfg);
    const stElems = (n: string) => B * H * stShapes[n]!.reduce((a, b) => a * b, 1);
    const row = (fn: string, C: number | null, m: { kernel: number; callMs: number }, ws: number, traffic: number): void => {
      const gbps = traffic / (m.kernel * 1e-3) / 1e9;
      const r: Row = { rule: decl.key, fn, d, C, kernel_ms: m.kernel, call_ms: m.callMs, workspace_bytes: ws, traffic_bytes: traffic, gbps, peak_fraction: peak > 0 ? gbps / peak : null };
      rows.push(r);
      printRow(r);
    };
    const pair = lib.pair(decl.key);
    const first = d === SIZES.ds[0];
    if (typeof pair === "string") {
      if (first) console.log(`${decl.key.padEnd(9)} ${pair}`);
    }
    else {
      const a = pair.abi;
      const sizes: Record<string, number> = {};
      for (const n of a.inputs) sizes[n] = tokenElems(a, n, shape, cfg);
      for (const n of a.state) sizes[`${n}_0`] = sizes[n] = sizes[`d${n}`] = sizes[`d${n}_0`] = stElems(n);
      sizes.y = sizes.dy = tokenElems(a, "y", shape);
      for (const g of a.grads) sizes[g] = tokenElems(a, g.slice(1), shape, cfg);
      const mem = place(lib, sizes, rng, d);
      const sum = (names: string[]) => names.reduce((s, n) => s + (mem.bytes[n] ?? 0), 0);
      try {
        for (const C of CS) {
          const ws = pair.workspaceBytes(shape, C, cfg);
          const wsPtr = ws === 0 ? null : lib.memory.alloc(ws);
          try {
            const ptrs: Pointers = { ...mem.ptrs, workspace: wsPtr };
            const f = await measure(lib, () => pair.callRaw("forward", shape, C, cfg, ptrs));
            row("forward", C, f, ws, sum([...a.inputs, ...a.state.map((n) => `${n}_0`), "y", ...a.state]) + ws);
            const b = await measure(lib, () => pair.callRaw("backward", shape, C, cfg, ptrs));
            row("backward", C, b, ws, sum([...a.inputs, ...a.state.map((n) => `${n}_0`), "dy", ...a.state.map((n) => `d${n}`), ...a.grads, ...a.state.map((n) => `d${n}_0`)]) + ws);
          } finally {
            lib.memory.free(wsPtr);
          }
        }
      } finally {
        mem.free();
      }
    }
    const fz = decl.frozen === null ? null : lib.frozen(decl.key);
    if (fz === null) continue;
    if (typeof fz === "string") {
      if (first) console.log(`${decl.key.padEnd(9)} frozen read: ${fz}`);
      continue;
    }
    const sizes: Record<string, number> = { q: tokenElems(fz.abi, "q", shape), y: tokenElems(fz.abi, "y", shape), dy: tokenElems(fz.abi, "y", shape), dq: tokenElems(fz.abi, "q", shape) };
    for (const n of fz.abi.state) sizes[n] = sizes[`d${n}`] = stElems(n);
    const mem = place(lib, sizes, rng, d);
    const ws = fz.workspaceBytes(shape, cfg);
    const wsPtr = ws === 0 ? null : lib.memory.alloc(ws);
    try {
      const ptrs: Pointers = { ...mem.ptrs, workspace: wsPtr };
      const sum = (names: string[]) => names.reduce((s, n) => s + (mem.bytes[n] ?? 0), 0);
      row("frozen_forward", null, await measure(lib, () => fz.callRaw("frozen_forward", shape, cfg, ptrs)), ws, sum(["q", ...fz.abi.state, "y"]) + ws);
      row("frozen_backward", null, await measure(lib, () => fz.callRaw("frozen_backward", shape, cfg, ptrs)), ws,
        sum(["q", ...fz.abi.state, "dy", "dq", ...fz.abi.state.map((n) => `d${n}`)]) + ws);
    } finally {
      lib.memory.free(wsPtr);
      mem.free();
    }
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

  // bun:ffi overhead: 1000 calls per sample, so tinybench's own per-sample cost drops out
  const noop = lib.abiVersion;
  const jsFn = (() => 1) as () => number;
  const REPS = 1000;
  let sink = 0;
  const ffi = await latency(() => { for (let i = 0; i < REPS; i++) sink += noop(); });
  const js = await latency(() => { for (let i = 0; i < REPS; i++) sink += jsFn(); });
  if (sink === 0) throw new Error("unreachable");
  const ffiNs = (ffi * 1e6) / REPS, jsNs = (js * 1e6) / REPS;
  console.log(`bun:ffi no-op (nlk_abi_version): ${ffiNs.toFixed(1)} ns/call (JS function: ${jsNs.toFixed(1)} ns)`);

  const peak = lib.peakGbps();
  const { B, T, H } = SIZES;
  console.log(`\nB = ${B}, T = ${T}, H = ${H}; peak memory bandwidth ${peak > 0 ? `${peak.toFixed(0)} GB/s` : "unknown"}`);
  console.log(HEAD.map((h, i) => (i < 2 ? h.padEnd(i === 0 ? 9 : 16) : h.padStart([4, 3, 10, 10, 12, 8, 8][i - 2]!))).join(" "));
  const rows: Row[] = [];
  for (const decl of RULES) await ruleRows(lib, decl, peak, rows);
  const out = { backend: backendArg, device: resolved.info.device, ffi_noop_ns: ffiNs, js_noop_ns: jsNs, B, T, H, peak_gbps: peak, rows };
  mkdirSync(join(ROOT, "reports"), { recursive: true });
  const file = join(ROOT, "reports", `bench-kernels-${backendSlug(backendArg)}${small ? "-small" : ""}.json`);
  writeFileSync(file, JSON.stringify(out, null, 2) + "\n");
  console.log(`\nwrote ${file}`);
}

await main();
