/**
 * The precision emulation (docs/spec/precision.md#emulation) and the bias oracle
 * (docs/spec/precision.md#bias), each shown able to fail.
 */
import { expect, test } from "bun:test";
import { biasVerdict, BIAS_FLOOR } from "../oracle/bias.ts";
import { flashRule } from "../oracle/compare.ts";
import { dot, matvec } from "../src/numeric.ts";
import { accStep, roundTo, withAccumulate } from "../src/precision.ts";
import { Rng } from "../src/rng.ts";

test("f16 rounding agrees with the platform's Math.f16round on a million values", () => {
  const rng = new Rng(11);
  for (let i = 0; i < 1_000_000; i++) {
    const x = (rng.next() - 0.5) * 2 ** Math.floor(rng.next() * 40 - 25);
    if (roundTo("f16", x) !== Math.f16round(x)) throw new Error(`f16(${x}) = ${roundTo("f16", x)}, platform ${Math.f16round(x)}`);
  }
});

test("bf16 rounding: ties to even, carries, subnormals, overflow", () => {
  // bf16 has 8 significand bits: 1 + 2^-7 is representable, 1 + 2^-8 is the tie between 1 and 1 + 2^-7
  expect(roundTo("bf16", 1 + 2 ** -7)).toBe(1 + 2 ** -7);
  expect(roundTo("bf16", 1 + 2 ** -8)).toBe(1); // tie → even (1)
  expect(roundTo("bf16", 1 + 3 * 2 ** -8)).toBe(1 + 2 ** -6); // tie → even (1 + 2·2^-7)
  expect(roundTo("bf16", 1 + 2 ** -8 + 2 ** -30)).toBe(1 + 2 ** -7); // above the tie
  expect(roundTo("bf16", 2 - 2 ** -9)).toBe(2); // carry into the exponent
  expect(roundTo("bf16", -3.14159)).toBe(-3.140625);
  expect(roundTo("bf16", 2 ** -133)).toBe(2 ** -133); // the smallest subnormal
  expect(roundTo("bf16", 2 ** -135)).toBe(0);
  expect(roundTo("bf16", 3.4e38)).toBe(Infinity);
  expect(Number.isNaN(roundTo("bf16", NaN))).toBe(true);
  // against the f32 bit pattern: for f32 values, bf16 = RNE on the upper 16 bits
  const f = new Float32Array(1), u = new Uint32Array(f.buffer), rng = new Rng(5);
  for (let i = 0; i < 200_000; i++) {
    f[0] = (rng.next() - 0.5) * 2 ** Math.floor(rng.next() * 60 - 30);
    const x = f[0]!, b = u[0]!;
    const lsb = (b >>> 16) & 1;
    u[0] = ((b + 0x7fff + lsb) >>> 16) << 16;
    if (roundTo("bf16", x) !== f[0]) throw new Error(`bf16(${x}) = ${roundTo("bf16", x)}, bit rounding ${f[0]}`);
  }
});

test("f32 accumulation rounds every step, in the same order; f64 mode is unchanged", () => {
  const n = 4096, rng = new Rng(3);
  const a = new Float32Array(n), b = new Float32Array(n);
  for (let i = 0; i < n; i++) { a[i] = rng.next(); b[i] = rng.next(); }
  let plain = 0, exact = 0;
  for (let i = 0; i < n; i++) { plain = Math.fround(plain + a[i]! * b[i]!); exact += a[i]! * b[i]!; }
  expect(withAccumulate("f32", () => dot(a, b))).toBe(plain);
  expect(dot(a, b)).toBe(exact);
  expect(plain).not.toBe(exact);
  const out = new Float64Array(1);
  withAccumulate("f32", () => matvec(a, 0, 1, n, b, 0, out));
  expect(out[0]).toBe(plain);
});

/**
 * ref64 r and two independent correct runs: every element off by a relative rounding of size u,
 * and one element in a hundred off by 2% of the scale (the few ill-conditioned entries that set a
 * real kernel's max error, and so the flash bound, while the bulk of the tensor is accurate).
 */
function synthetic(n: number, u: number, seed: number) {
  const rng = new Rng(seed), r = new Float64Array(n), kernel = new Float64Array(n), plain = new Float64Array(n);
  for (let i = 0; i < n; i++) r[i] = rng.next() * 2 - 1;
  const noisy = (x: number) => x * (1 + u * (rng.next() * 2 - 1)) + (rng.next() < 0.01 ? 0.02 * (rng.next() * 2 - 1) : 0);
  for (let i = 0; i < n; i++) {
    kernel[i] = noisy(r[i]!);
    plain[i] = noisy(r[i]!);
  }
  return { r, kernel, plain };
}

test("the bias test passes a correct noisy kernel and catches a 1% scale the flash rule passes", () => {
  let flashMissed = 0;
  for (let seed = 1; seed <= 20; seed++) {
    const { r, kernel, plain } = synthetic(16384, 2 ** -8, seed);
    expect(flashRule(kernel, r, plain, 0).ok).toBe(true);
    expect(biasVerdict(kernel, r, plain, "bf16").ok).toBe(true);
    const scaled = kernel.map((x) => x * 1.01);
    if (flashRule(scaled, r, plain, 0).ok) flashMissed++;
    const v = biasVerdict(scaled, r, plain, "bf16");
    expect(v.ok).toBe(false);
    expect(Math.abs(v.slope)).toBeGreaterThan(BIAS_FLOOR.bf16);
  }
  // the point of the test: the flash rule alone lets the planted scale through
  expect(flashMissed).toBe(20);
});

test("a NaN in the kernel's values fails the bias test", () => {
  const { r, kernel } = synthetic(64, 2 ** -24, 9);
  kernel[3] = NaN;
  expect(biasVerdict(kernel, r, r, "f32").ok).toBe(false);
});

test("random rounding lands on one of the two f32 neighbours, each about half the time, the same way for the same seed", () => {
  const x = 1 + 2 ** -30; // between 1 and the next f32 above it
  const up = Math.fround(1 + 2 ** -23);
  const draw = (seed: number) => withAccumulate("f32", () => Array.from({ length: 2000 }, () => accStep(x)), { random: seed });
  const a = draw(7);
  expect(a.every((v) => v === 1 || v === up)).toBe(true);
  const ups = a.filter((v) => v === up).length;
  expect(ups).toBeGreaterThan(850);
  expect(ups).toBeLessThan(1150);
  expect(draw(7)).toEqual(a);
  // negative values and values just above zero step by one f32 ulp too, towards x's side
  const neg = withAccumulate("f32", () => Array.from({ length: 200 }, () => accStep(-x)), { random: 3 });
  expect(neg.every((v) => v === -1 || v === -up)).toBe(true);
  const tiny = withAccumulate("f32", () => Array.from({ length: 200 }, () => accStep(2 ** -151)), { random: 3 });
  expect(new Set(tiny)).toEqual(new Set([0, 2 ** -149]));
  // exact values and round-to-nearest mode are untouched
  expect(withAccumulate("f32", () => accStep(0.5), { random: 1 })).toBe(0.5);
  expect(withAccumulate("f32", () => accStep(x))).toBe(1);
});
