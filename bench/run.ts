/**
 * Benchmarks (tinybench): tape recording overhead per op, backward/forward ratio of a 200-op
 * chain at d=64, and per-rule forward and backward time at d=64, seq_len=256 (f64 and f32).
 * Writes reports/bench.json and prints a table. Usage: npm run bench -- [--quick]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Bench } from "tinybench";
import { buildRuleCase } from "../cases/rule-case.ts";
import { ROOT } from "../paths.ts";
import { add, matmulTransposeB, mul, scale, sigmoid, sumReduce } from "../src/ops/index.ts";
import { RULES } from "../src/rules/index.ts";
import { frozenBackward, frozenForwardSaved, ruleBackward, ruleForwardSaved } from "../src/rules/level.ts";
import { Rng } from "../src/rng.ts";
import { withTape } from "../src/tape.ts";
import { Tensor, type DType } from "../src/tensor.ts";

const quick = process.argv.includes("--quick");
const TIME = quick ? 50 : 300;

function rand(shape: number[], rng: Rng, dtype: DType = "f64"): Tensor {
  const t = new Tensor(dtype, shape);
  for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(-1, 1);
  return t;
}

async function meanMs(name: string, fn: () => void): Promise<number> {
  const b = new Bench({ time: TIME, warmupTime: Math.min(TIME, 100) });
  b.add(name, fn);
  await b.run();
  const r = b.tasks[0]!.result;
  if (r.state !== "completed") throw new Error(`benchmark ${name}: ${r.state}`);
  return r.latency.mean;
}

// ── (1) recording overhead on tiny tensors ──────────────────────────────────
const TINY_OPS = 200;
function tinyChain(a: Tensor, b: Tensor): Tensor {
  let x = a;
  for (let i = 0; i < TINY_OPS / 2; i++) x = mul([add([x, b], {}), b], {});
  return x;
}

// ── (2) 200-op mixed chain at d = 64 ───────────────────────────────────────
function mixedChain(x0: Tensor, W: Tensor): Tensor {
  let x = x0;
  for (let i = 0; i < 40; i++) {
    const a = matmulTransposeB([x, W], {});
    const s = sigmoid([a], {});
    const m = mul([s, x], {});
    x = add([m, scale([a], { c: 0.5 })], {});
  }
  return x; // 5 ops x 40 = 200 ops
}

interface RuleRow { rule: string; dtype: DType; forward_ms: number; backward_ms: number; ratio: number }

async function main(): Promise<void> {
  const rng = new Rng(7);
  const a = rand([2, 2], rng), b = rand([2, 2], rng);
  const plain = await meanMs("tiny chain untraced", () => { tinyChain(a, b); });
  const traced = await meanMs("tiny chain traced", () => { withTape((t) => tinyChain(t.param(a), t.param(b))); });
  const overheadNs = ((traced - plain) * 1e6) / TINY_OPS;

  const x0 = rand([64, 64], rng), W = rand([64, 64], rng, "f64");
  for (let i = 0; i < W.size; i++) W.data[i]! /= 8;
  const fwd = await meanMs("mixed chain forward", () => { mixedChain(x0, W); });
  const fwdTraced = await meanMs("mixed chain forward traced", () => { withTape((t) => mixedChain(t.param(x0), t.param(W))); });
  const fwdBwd = await meanMs("mixed chain forward+backward", () => {
    withTape((t) => { const y = sumReduce([mixedChain(t.param(x0), t.param(W))], {}); t.backward(y); });
  });
  const bwd = fwdBwd - fwdTraced;

  const rows: RuleRow[] = [];
  for (const decl of RULES) {
    for (const dtype of ["f64", "f32"] as const) {
      const spec = { d: 64, seq_len: 256, hyper: {}, alpha: "mid" as const, theta: "small" as const, state: "init" as const, seed: 3 };
      const c = buildRuleCase(decl, spec, dtype);
      const fwdMs = await meanMs(`${decl.key} ${dtype} forward`, () => { ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg); });
      const { saved } = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg);
      const bwdMs = await meanMs(`${decl.key} ${dtype} backward`, () => { ruleBackward(decl, saved, c.dy, c.cfg); });
      rows.push({ rule: decl.key, dtype, forward_ms: fwdMs, backward_ms: bwdMs, ratio: bwdMs / fwdMs });
      if (decl.frozen !== null) {
        const rs = { ...spec, state: "random" as const };
        const cf = buildRuleCase(decl, rs, dtype);
        const ff = await meanMs(`${decl.key}.frozen ${dtype} forward`, () => { frozenForwardSaved(decl, cf.X, cf.params, cf.state, cf.cfg); });
        const fs = frozenForwardSaved(decl, cf.X, cf.params, cf.state, cf.cfg).saved;
        const fb = await meanMs(`${decl.key}.frozen ${dtype} backward`, () => { frozenBackward(decl, fs, cf.dy, cf.cfg); });
        rows.push({ rule: `${decl.key}.frozen`, dtype, forward_ms: ff, backward_ms: fb, ratio: fb / ff });
      }
    }
  }

  const report = {
    format: "nlc-bench/1",
    date: new Date().toISOString(),
    runtime: `bun ${Bun.version}`,
    tape: {
      recording_overhead_ns_per_op: overheadNs,
      tiny_chain: { ops: TINY_OPS, untraced_ms: plain, traced_ms: traced },
      mixed_chain_d64: { ops: 200, forward_ms: fwd, forward_traced_ms: fwdTraced, backward_ms: bwd, backward_over_forward: bwd / fwd },
    },
    rules: { d: 64, seq_len: 256, rows },
  };
  mkdirSync(join(ROOT, "reports"), { recursive: true });
  writeFileSync(join(ROOT, "reports", "bench.json"), JSON.stringify(report, null, 2) + "\n");

  console.log(`tape recording overhead: ${overheadNs.toFixed(1)} ns/op (target <= 100)`);
  console.log(`200-op chain at d=64: forward ${fwd.toFixed(3)} ms, backward ${bwd.toFixed(3)} ms, backward/forward ${(bwd / fwd).toFixed(2)} (target <= 2.5)`);
  console.table(rows.map((r) => ({ rule: r.rule, dtype: r.dtype, "forward ms": r.forward_ms.toFixed(2), "backward ms": r.backward_ms.toFixed(2), "bwd/fwd": r.ratio.toFixed(2) })));
  console.log("written: reports/bench.json");
}

await main();
