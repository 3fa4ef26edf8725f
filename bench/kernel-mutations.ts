/**
 * What the output mutations add to a kernel check (docs/spec/conformance.md#signatures): the judge
 * of one case with and without judging the mutated copies of its outputs, on a C5-sized case (B = 2,
 * H = 2, T = 20, d = 8: y, one d×d state, five per-token gradients, two gate gradients and
 * d(initial state)), wall clock over many repetitions. The mutations reuse the judged outputs; the
 * kernel and the references are not run again, so their cost is the judge's own, times the number
 * of signatures.
 *
 *   bun bench/kernel-mutations.ts [--reps 200]
 */
import { flashCompare, type Compared } from "../oracle/kernel-judge.ts";
import { SCALE_EPS, SIGNATURES } from "../oracle/kernel-power.ts";
import { Rng } from "../src/rng.ts";
import type { Precision } from "../src/precision.ts";

const repsArg = process.argv.indexOf("--reps");
const REPS = repsArg > 0 ? Number(process.argv[repsArg + 1]) : 200;
const P: Precision = { storage: "f32", state: "f32", accumulate: "f64" };
const B = 2, H = 2, T = 20, d = 8;

function makeCase(seed: number): Compared[] {
  const rng = new Rng(seed);
  const items: Compared[] = [];
  const tensor = (name: string, group: "out" | "grad", part: "token" | "state", len: number) => {
    for (let n = 0; n < B * H; n++) {
      const ref64 = Float64Array.from({ length: len }, () => rng.uniform(-1, 1));
      const ref32 = Float64Array.from(ref64, (x) => Math.fround(x));
      const kernel = Float64Array.from(ref64, (x) => Math.fround(x * (1 + 1e-8 * rng.uniform(-1, 1))));
      items.push({ name, group, part, seq: n, kernel, ref64, ref32 });
    }
  };
  tensor("y", "out", "token", T * d);
  tensor("state M", "out", "state", d * d);
  for (const g of ["dk", "dv", "dq", "dx", "domega"]) tensor(g, "grad", "token", T * d);
  for (const g of ["dalpha", "dtheta"]) tensor(g, "grad", "token", T);
  tensor("dM_0", "grad", "state", d * d);
  return items;
}

const cases = Array.from({ length: 8 }, (_, i) => makeCase(i + 1));
const layout = { B, H, T, C: 4 };
function time(mutations: boolean): number {
  const t0 = performance.now();
  for (let r = 0; r < REPS; r++) for (const c of cases) flashCompare(c, new Set(), "bench", P, { layout, mutations });
  return (performance.now() - t0) / (REPS * cases.length);
}
time(true); // warm up
const off = time(false), on = time(true);
const copies = SCALE_EPS.length + SIGNATURES.length - 1;
console.log(`judge per case: ${off.toFixed(3)} ms without mutations, ${on.toFixed(3)} ms with (${copies} mutated copies per tensor); added ${(on - off).toFixed(3)} ms per case`);
