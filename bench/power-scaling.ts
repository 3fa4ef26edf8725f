/**
 * How the bound and the smallest scale error it can detect change with T and d
 * (docs/spec/precision.md#power-scaling): C5's forward and backward cases (the judge's own power
 * computation, oracle/kernel-power.ts through flashCompare) for Delta on the pure-f32 cpu build
 * (cpu-f32: f32 storage and sums), one batch of two sequences (mid gates, random initial state,
 * dy and d(final state) given, C = 16) at every T × d of the grid. Prints per cell the bound of y
 * and of the weakest gradient relative to their max|ref64|, and the power (smallest relative scale
 * error detected, either sign) of y and of the weakest gradient, with the test that gives it.
 * Usage: npx bun bench/power-scaling.ts [--T 16,64,256,1024] [--d 16,64,128] [--seed 1]
 */
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import { backwardCase, forwardCase, type KSpec } from "../conformance/kernel-api.ts";
import { ruleByKey } from "../src/rules/index.ts";

const argv = process.argv.slice(2);
const list = (name: string, dflt: number[]): number[] => {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = (argv[i + 1] ?? "").split(",").map(Number);
  if (v.length === 0 || v.some((x) => !Number.isInteger(x) || x < 1)) {
    console.error(`power-scaling: --${name} takes a comma-separated list of positive integers`);
    process.exit(2);
  }
  return v;
};
const Ts = list("T", [16, 64, 256, 1024]), ds = list("d", [16, 64, 128]), seed = list("seed", [1])[0]!;
const decl = ruleByKey("delta");
const lib = openKernelLib((await buildLib("cpu-f32")).path, stateShapesOf);

interface TensorDetail { bound: number; plain: number; power: number | null; power_by: string; err: number }
const fmt = (x: number | null | undefined) => (x === null || x === undefined ? "—" : x.toExponential(1));

console.log(`power and bound by T and d: delta, cpu-f32, B = 1, H = 2, C = 16, seed ${seed}`);
console.log("every figure relative to the tensor's max|ref64|; plain: 2·max|plain − ref64| (the bound is that plus the floor, 1e-4)");
console.log("T      d     y plain   y bound  y power (by)     weakest grad   plain     bound    power (by)");
for (const d of ds) for (const T of Ts) {
  const k: KSpec = {
    base: { d, seq_len: T, hyper: {}, alpha: "mid", theta: "small", state: "random", seed: seed * 7919 + d * 31 + T },
    B: 1, H: 2, C: 16, extra: [{ seed: seed * 7919 + d * 31 + T + 1, alpha: "low", theta: "large", state: "random" }], dyNull: false, dFinalNull: false,
  };
  const rows: { name: string; t: TensorDetail; max: number }[] = [];
  for (const phase of [forwardCase, backwardCase]) {
    const o = phase(decl, false, lib, k, new Set());
    if (!o.ok) console.log(`  T = ${T}, d = ${d}: ${o.message}`);
    const tensors = (o.details?.tensors ?? {}) as Record<string, TensorDetail & { floor: number }>;
    // the floor is FLOOR_REL · max|ref64| (or its group's share): max|ref64| back from it
    for (const [name, t] of Object.entries(tensors)) rows.push({ name, t, max: t.floor / 1e-4 });
  }
  const y = rows.find((r) => r.name === "y")!;
  const grads = rows.filter((r) => r.name.startsWith("d"));
  const weakest = grads.reduce((w, r) => ((r.t.power ?? Infinity) > (w.t.power ?? Infinity) ? r : w), grads[0]!);
  console.log(`${String(T).padEnd(7)}${String(d).padEnd(6)}${fmt((2 * y.t.plain) / y.max).padEnd(10)}${fmt(y.t.bound / y.max).padEnd(9)}${`${fmt(y.t.power)} (${y.t.power_by})`.padEnd(17)}` +
    `${weakest.name.padEnd(15)}${fmt((2 * weakest.t.plain) / weakest.max).padEnd(10)}${fmt(weakest.t.bound / weakest.max).padEnd(9)}${fmt(weakest.t.power)} (${weakest.t.power_by})`);
}
