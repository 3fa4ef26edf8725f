/**
 * f64 numeric kernels before and after the process has run f32 work (src/numeric.ts keeps one
 * specialised copy of its array kernels per operand class, so the second number should match the
 * first). The mixed conformance run does exactly this: f32 cases first, f64 cases later.
 * Usage: npx bun bench/numeric-dtype.ts
 */
import { Bench } from "tinybench";
import { addOuter, dot, matmul, matTvec, matvec } from "../src/numeric.ts";

const N = 32;

function operands(C: Float64ArrayConstructor | Float32ArrayConstructor) {
  const a = new C(N * N), b = new C(N * N);
  for (let i = 0; i < a.length; i++) {
    a[i] = Math.sin(i);
    b[i] = Math.cos(i);
  }
  return { a, b, o: new C(N * N), v: new C(N), w: new C(N) };
}

/** One round of the kernels the rules use most, on one class of array. */
function round(x: ReturnType<typeof operands>): number {
  matmul(x.a, x.b, N, N, N, x.o);
  let s = 0;
  for (let i = 0; i < 20; i++) {
    matvec(x.a, 0, N, N, x.b, 0, x.v);
    matTvec(x.a, 0, N, N, x.v, 0, x.w);
    addOuter(x.o, 0, N, N, 1e-3, x.v, 0, x.w, 0);
    s += dot(x.v, x.w);
  }
  return s;
}

async function measure(label: string, x: ReturnType<typeof operands>): Promise<number> {
  const b = new Bench({ time: 400, warmupTime: 100 });
  b.add(label, () => round(x));
  await b.run();
  const r = b.tasks[0]!.result;
  if (r.state !== "completed") throw new Error(`benchmark: ${r.state}`);
  const ms = r.latency.mean;
  console.log(`${label.padEnd(22)} ${(ms * 1000).toFixed(0)} µs a round`);
  return ms;
}

const f64 = operands(Float64Array), f32 = operands(Float32Array);
const before = await measure("f64, f64 only so far", f64);
await measure("f32", f32);
const after = await measure("f64 after f32", f64);
console.log(`f64 slowdown after f32 work: ${(after / before).toFixed(2)}x`);
