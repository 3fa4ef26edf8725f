/**
 * What the hazard probes (docs/spec/hazards.md) cost per kernel call (tinybench): a pair's forward
 * and backward on the cpu-emu build at shapes C5's generated cases use, with the probes as every
 * check runs them (guards, inputs compared, a second run) against none (no guards, one run).
 *   npx bun bench/hazard-probes.ts [--backend cpu-emu|lib:<path>] [--rules delta,titans]
 * Prints per rule and shape the time of a forward plus backward both ways and the ratio.
 */
import { Bench } from "tinybench";
import { tokenElems, type Shape } from "../ffi/abi.ts";
import { resolveBackend } from "../ffi/backends.ts";
import { HAZARD_PLAN, type HazardPlan } from "../ffi/hazards.ts";
import type { RulePair } from "../ffi/lib-types.ts";
import { withDefaults } from "../src/rules/level.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { stateShapesOf } from "../ffi/backends.ts";
import { Rng } from "../src/rng.ts";

const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : dflt;
};
const NONE: HazardPlan = { ...HAZARD_PLAN, guard_bytes: 0, rerun: false };
const SHAPES: readonly Shape[] = [{ B: 1, T: 3, H: 2, d: 5 }, { B: 2, T: 6, H: 2, d: 12 }, { B: 1, T: 17, H: 2, d: 4 }];

const r = await resolveBackend(arg("--backend", "cpu-emu"));
if (r.lib === undefined) throw new Error(`backend unavailable: ${r.info.reason}`);
const lib = r.lib;
const rng = new Rng(7);
for (const rule of arg("--rules", "delta,titans").split(",")) {
  const pair = lib.pair(rule) as RulePair;
  if (typeof pair === "string") throw new Error(pair);
  for (const shape of SHAPES) {
    const cfg = withDefaults(ruleByKey(rule), { d: shape.d, seq_len: shape.T });
    const fill = (n: number, lo: number, hi: number) => Float32Array.from({ length: n }, () => rng.uniform(lo, hi));
    const inputs = Object.fromEntries(pair.abi.inputs.map((n) => [n, ["alpha", "theta", "eta"].includes(n) ? fill(tokenElems(pair.abi, n, shape, cfg), 0.1, 0.5) : fill(tokenElems(pair.abi, n, shape, cfg), -1, 1)]));
    const st = stateShapesOf(rule, cfg);
    const state = Object.fromEntries(pair.abi.state.map((n) => [n, fill(shape.B * shape.H * st[n]!.reduce((a, b) => a * b, 1), -0.5, 0.5)]));
    const dy = fill(tokenElems(pair.abi, "y", shape), -1, 1);
    const call = () => {
      const f = pair.forward(shape, 1, cfg, inputs, state);
      pair.backward(shape, 1, cfg, inputs, state, f.ws, dy, state);
      f.ws.free();
    };
    const time = async (plan: HazardPlan) => {
      lib.hazards = plan;
      const b = new Bench({ time: 300, warmupTime: 100 });
      b.add("x", call);
      await b.run();
      const res = b.tasks[0]!.result;
      if (res.state !== "completed") throw new Error(`benchmark: ${res.state}`);
      return res.latency.mean;
    };
    const none = await time(NONE), probed = await time(HAZARD_PLAN);
    console.log(`${rule} B=${shape.B} T=${shape.T} H=${shape.H} d=${shape.d}: forward+backward ${none.toFixed(3)} ms without probes, ${probed.toFixed(3)} ms with (x${(probed / none).toFixed(2)})`);
  }
}
lib.hazards = HAZARD_PLAN;
