/**
 * Low precision, emulated (docs/spec/precision.md#emulation): rounding to the storage dtypes a
 * kernel may declare (f32, bf16, f16; round to nearest, ties to even) and the accumulate dtype the
 * numeric kernels sum in (f64, or f32 for a plain-f32 reference, or tf32: f32 sums of products whose
 * operands are rounded to TF32, as tensor cores multiply f32 matrices; docs/spec/precision.md#tf32).
 *
 * This exists only for the plain-precision reference that measures how much rounding a kernel of a
 * declared precision may show (D5, D15); ref64, the truth, never runs with it.
 */

import { Rng } from "./rng.ts";

export type StorageDType = "f32" | "bf16" | "f16";
export type AccumulateDType = "f64" | "f32" | "tf32";

/** What a kernel declares for the tensors crossing its ABI, its state, and its sums. */
export interface Precision {
  readonly storage: StorageDType;
  readonly state: StorageDType;
  readonly accumulate: AccumulateDType;
}

/** Significand bits (with the implicit one), smallest normal exponent, largest finite value. */
const FORMATS: Readonly<Record<StorageDType, { bits: number; emin: number; max: number }>> = {
  f32: { bits: 24, emin: -126, max: 3.4028234663852886e38 },
  bf16: { bits: 8, emin: -126, max: 3.3895313892515355e38 },
  f16: { bits: 11, emin: -14, max: 65504 },
};

/**
 * x rounded to the dtype, to nearest with ties to even, directly from f64 (no double rounding
 * through f32); subnormals kept, overflow to ±Infinity, NaN kept.
 */
export function roundTo(dtype: StorageDType, x: number): number {
  if (dtype === "f32") return Math.fround(x);
  if (x === 0 || !Number.isFinite(x)) return x;
  const { bits, emin, max } = FORMATS[dtype];
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  // log2 can be off by one next to a power of two
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  const ulp = 2 ** (Math.max(e, emin) - (bits - 1));
  const r = a / ulp; // exact: a power-of-two scaling
  const f = Math.floor(r), frac = r - f;
  const n = frac > 0.5 || (frac === 0.5 && f % 2 === 1) ? f + 1 : f;
  const y = n * ulp;
  // a value past the largest finite one rounds to infinity when it is at least half an ulp beyond
  if (y > max) return x > 0 ? Infinity : -Infinity;
  return x > 0 ? y : -y;
}

/** A copy of a with every entry rounded to the dtype, as f64 values. */
export function roundedCopy(dtype: StorageDType, a: ArrayLike<number>): Float64Array {
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = roundTo(dtype, a[i]!);
  return out;
}

/**
 * x as a tensor core takes an f32 operand in TF32: f32's exponent range and 11 significand bits (10
 * explicit), the 13 dropped bits cut off (rounded toward zero), as the hardware does when the kernel
 * hands it f32 values (Triton's tl.dot in "tf32", f32 matrix multiplies allowed TF32); NaN and
 * ±Infinity kept. A kernel that rounds its operands to nearest first is within the same yardstick
 * (docs/spec/precision.md#tf32).
 */
export function roundTF32(x: number): number {
  tf32Value[0] = x; // to f32 first: a TF32 operand is an f32 value
  if (!Number.isFinite(tf32Value[0]!)) return tf32Value[0]!;
  tf32Bits[0] = (tf32Bits[0]! & ~0x1fff) >>> 0; // the low 13 mantissa bits cleared: toward zero
  return tf32Value[0]!;
}
const tf32Value = new Float32Array(1), tf32Bits = new Uint32Array(tf32Value.buffer);

/** Unit roundoff of the dtype: half its machine epsilon. */
export function unitRoundoff(dtype: StorageDType | AccumulateDType): number {
  switch (dtype) {
    case "f64": return 2 ** -53;
    case "f32": return 2 ** -24;
    case "tf32": return 2 ** -10; // cut toward zero: up to one unit in the last of 11 places
    case "bf16": return 2 ** -8;
    case "f16": return 2 ** -11;
  }
}

let accumulateF32 = false;
/** True under withAccumulate("tf32"): the numeric kernels' products take TF32-rounded operands. */
let productsTF32 = false;
let reversed = false;
/** The random stream of random rounding (withAccumulate's { random: seed }), or null: round to nearest. */
let randomBits: Rng | null = null;

/** True while the numeric kernels sum in f32 (see withAccumulate). */
export function accumulatesInF32(): boolean {
  return accumulateF32;
}

/** True while the numeric kernels' products round their operands to TF32 (withAccumulate("tf32")). */
export function productsInTF32(): boolean {
  return productsTF32;
}

/** True while the f32 sums round randomly (withAccumulate's { random: seed }). */
export function roundsRandomly(): boolean {
  return randomBits !== null;
}

/** True while the numeric kernels sum in reverse order (see withAccumulate). */
export function sumsReversed(): boolean {
  return reversed;
}

const one32 = new Float32Array(1), bits32 = new Uint32Array(one32.buffer);

/**
 * x rounded to f32 as the current f32 sums round: to nearest, or — under random rounding — to
 * either f32 neighbour of an inexact x with probability 1/2 each.
 */
export function round32(x: number): number {
  const r = Math.fround(x);
  if (randomBits === null || r === x || !Number.isFinite(r) || randomBits.next() < 0.5) return r;
  // the other neighbour: one step of the f32 bit pattern away from zero or towards it
  one32[0] = r;
  bits32[0] = Math.abs(x) > Math.abs(r) ? bits32[0]! + 1 : bits32[0]! - 1;
  return one32[0]!;
}

/**
 * How a plain f32 reference rounds its sums: in the reference's natural order, in reverse order,
 * or in the natural order with random rounding (a stream seeded by `random`). Each is an equally
 * correct f32 computation that lands on its own rounding; together they sample the spread a
 * correct f32 kernel can show (docs/spec/precision.md#orders).
 */
export type SumRounding = "natural" | "reversed" | { readonly random: number };

/**
 * Runs fn with the numeric kernels' sums (dot products, matrix products, reductions) rounded to
 * f32 after every addition — a plain f32 kernel's accumulation in the reference's own order — and
 * the rules' adjoint scratch buffers (accBuffer) in f32. Restores the previous mode afterwards.
 * "tf32" is the same with every operand of the numeric kernels' products (dot products, matrix
 * products, matrix–vector products) rounded to TF32 first (roundTF32); inline sums and elementwise
 * products are f32 as under "f32".
 */
export function withAccumulate<T>(acc: AccumulateDType, fn: () => T, rounding: SumRounding = "natural"): T {
  const before = enterAccumulate(acc, rounding);
  try {
    return fn();
  } finally {
    leaveAccumulate(before);
  }
}

/** The summing mode in force, as enterAccumulate returns it to be restored. */
export interface AccumulateMode {
  readonly accumulateF32: boolean;
  readonly productsTF32: boolean;
  readonly reversed: boolean;
  readonly randomBits: Rng | null;
}

/**
 * withAccumulate's mode set, for a caller that runs the code itself (no function handed in): the
 * mode before, which the caller restores with leaveAccumulate (in a `finally`).
 */
export function enterAccumulate(acc: AccumulateDType, rounding: SumRounding = "natural"): AccumulateMode {
  const before: AccumulateMode = { accumulateF32, productsTF32, reversed, randomBits };
  accumulateF32 = acc === "f32" || acc === "tf32";
  productsTF32 = acc === "tf32";
  // "reversed" sums every reduction from its last term to its first: a second, equally correct
  // rounding order, which stands in for a kernel when the bias test is calibrated.
  reversed = rounding === "reversed";
  randomBits = typeof rounding === "object" && accumulateF32 ? new Rng(rounding.random) : null;
  return before;
}

/** Restores the mode enterAccumulate returned. */
export function leaveAccumulate(m: AccumulateMode): void {
  accumulateF32 = m.accumulateF32;
  productsTF32 = m.productsTF32;
  reversed = m.reversed;
  randomBits = m.randomBits;
}

/**
 * One step of a sum written inline (not through src/numeric.ts): rounded to f32 under
 * withAccumulate("f32"), unchanged otherwise. `sum = accStep(sum + term)`.
 */
export function accStep(x: number): number {
  return accumulateF32 ? round32(x) : x;
}

/** A zeroed scratch buffer for accumulated quantities (adjoints, partial sums): f64, or f32 under withAccumulate("f32"). */
export function accBuffer(n: number): Float64Array | Float32Array {
  return accumulateF32 ? new Float32Array(n) : new Float64Array(n);
}
