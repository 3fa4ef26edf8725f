/**
 * Numeric kernels on flat row-major typed arrays. Every function writes into a fresh or a
 * caller-owned output and never into its inputs. Loops accumulate in a JS number (f64) and
 * store once, so f32 storage rounds exactly once per output element.
 *
 * Under withAccumulate("f32") (src/precision.ts; the plain-precision reference only) every sum
 * instead rounds to f32 after each multiply-add, in the same order: acc = fl32(acc + a·b), which is
 * a fused multiply-add because the product of two f32 values is exact in f64. Under
 * withAccumulate("tf32") the products' operands are TF32-rounded copies (`tf32`, below), taken
 * before the f32 kernels run: a tensor core's f32 matrix product.
 */
import { accumulatesInF32, productsInTF32, round32, roundTF32, sumsReversed } from "./precision.ts";
import type { Data } from "./tensor.ts";

/**
 * The array kernels, closed over what they consult. Self-contained (no free variables besides
 * globals and its parameters): it is also compiled from its source text, once per specialised copy.
 */
function arrayKernels(accumulatesInF32: () => boolean, sumsReversed: () => boolean, round32: (x: number) => number) {
  // f32 sums round through round32: to nearest, or randomly (src/precision.ts withAccumulate)
  const f = round32;
  let scratch = new Float64Array(64);
  let scratch32 = new Float32Array(64);

  /** out[m,n] = A[m,k] · B[k,n] */
  function matmul(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
    const acc32 = accumulatesInF32();
    const acc = acc32 ? new Float32Array(n) : new Float64Array(n);
    for (let i = 0; i < m; i++) {
      acc.fill(0);
      const ai = i * k, rev = sumsReversed();
      for (let pp = 0; pp < k; pp++) {
        const p = rev ? k - 1 - pp : pp;
        const av = a[ai + p]!;
        if (av === 0) continue;
        const bp = p * n;
        if (acc32) for (let j = 0; j < n; j++) acc[j] = f(acc[j]! + av * b[bp + j]!);
        else for (let j = 0; j < n; j++) acc[j]! += av * b[bp + j]!;
      }
      const oi = i * n;
      for (let j = 0; j < n; j++) out[oi + j] = acc[j]!;
    }
    return out;
  }

  /** out[m,n] = A[m,k] · B[n,k]^T */
  function matmulTB(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
    for (let i = 0; i < m; i++) {
      const ai = i * k;
      for (let j = 0; j < n; j++) {
        const bj = j * k;
        out[i * n + j] = dot(a, b, k, ai, bj);
      }
    }
    return out;
  }

  /** out[m,n] = A[k,m]^T · B[k,n] */
  function matmulTA(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
    const acc32 = accumulatesInF32();
    const acc = acc32 ? new Float32Array(m * n) : new Float64Array(m * n);
    const rev = sumsReversed();
    for (let pp = 0; pp < k; pp++) {
      const p = rev ? k - 1 - pp : pp;
      const ap = p * m;
      const bp = p * n;
      for (let i = 0; i < m; i++) {
        const av = a[ap + i]!;
        if (av === 0) continue;
        const oi = i * n;
        if (acc32) for (let j = 0; j < n; j++) acc[oi + j] = f(acc[oi + j]! + av * b[bp + j]!);
        else for (let j = 0; j < n; j++) acc[oi + j]! += av * b[bp + j]!;
      }
    }
    out.set(acc);
    return out;
  }

  /** out[c,r] = A[r,c]^T */
  function transpose(a: Data, rows: number, cols: number, out: Data): Data {
    for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = a[i * cols + j]!;
    return out;
  }

  function dot(a: Data, b: Data, n = a.length, ao = 0, bo = 0): number {
    let s = 0;
    if (sumsReversed()) {
      if (accumulatesInF32()) for (let i = n - 1; i >= 0; i--) s = f(s + a[ao + i]! * b[bo + i]!);
      else for (let i = n - 1; i >= 0; i--) s += a[ao + i]! * b[bo + i]!;
    } else if (accumulatesInF32()) for (let i = 0; i < n; i++) s = f(s + a[ao + i]! * b[bo + i]!);
    else for (let i = 0; i < n; i++) s += a[ao + i]! * b[bo + i]!;
    return s;
  }

  /** Row softmax (max-subtracted) of a [rows, cols] block into out. */
  function softmaxRows(x: Data, rows: number, cols: number, out: Data): Data {
    for (let r = 0; r < rows; r++) {
      const o = r * cols;
      let mx = -Infinity;
      for (let j = 0; j < cols; j++) mx = Math.max(mx, x[o + j]!);
      let sum = 0;
      if (accumulatesInF32()) for (let j = 0; j < cols; j++) sum = f(sum + f(Math.exp(x[o + j]! - mx)));
      else for (let j = 0; j < cols; j++) sum += Math.exp(x[o + j]! - mx);
      for (let j = 0; j < cols; j++) out[o + j] = Math.exp(x[o + j]! - mx) / sum;
    }
    return out;
  }

  /** VJP of a row softmax given its output p: dx = p ⊙ (dp − ⟨dp, p⟩) per row. */
  function softmaxRowsVjp(p: Data, dp: Data, rows: number, cols: number, out: Data): Data {
    for (let r = 0; r < rows; r++) {
      const o = r * cols;
      const s = dot(dp, p, cols, o, o);
      for (let j = 0; j < cols; j++) out[o + j] = p[o + j]! * (dp[o + j]! - s);
    }
    return out;
  }

  // ── small dense helpers for the rules' inner loops (offsets address rows inside flat buffers) ──

  /** out[oo..oo+rows) = A[ao: rows x cols] · x[xo..xo+cols) */
  function matvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
    for (let i = 0; i < rows; i++) out[oo + i] = dot(A, x, cols, ao + i * cols, xo);
  }

  /** out[oo..oo+cols) = A[ao: rows x cols]^T · x[xo..xo+rows) */
  function matTvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
    // Accumulate in f64 scratch and store once, so f32 outputs round once per element.
    const acc32 = accumulatesInF32();
    if (scratch.length < cols) scratch = new Float64Array(cols * 2);
    if (scratch32.length < cols) scratch32 = new Float32Array(cols * 2);
    const acc = acc32 ? scratch32 : scratch;
    acc.fill(0, 0, cols);
    const rev = sumsReversed();
    for (let ii = 0; ii < rows; ii++) {
      const i = rev ? rows - 1 - ii : ii;
      const xi = x[xo + i]!;
      if (xi === 0) continue;
      const r = ao + i * cols;
      if (acc32) for (let j = 0; j < cols; j++) acc[j] = f(acc[j]! + A[r + j]! * xi);
      else for (let j = 0; j < cols; j++) acc[j]! += A[r + j]! * xi;
    }
    for (let j = 0; j < cols; j++) out[oo + j] = acc[j]!;
  }

  /** A[ao: rows x cols] += c · u[uo..uo+rows) w[wo..wo+cols)^T */
  function addOuter(A: Data, ao: number, rows: number, cols: number, c: number, u: Data, uo: number, w: Data, wo: number): void {
    for (let i = 0; i < rows; i++) {
      const ui = c * u[uo + i]!;
      if (ui === 0) continue;
      const r = ao + i * cols;
      for (let j = 0; j < cols; j++) A[r + j]! += ui * w[wo + j]!;
    }
  }

  return { matmul, matmulTB, matmulTA, transpose, dot, softmaxRows, softmaxRowsVjp, matvec, matTvec, addOuter };
}
type ArrayKernels = ReturnType<typeof arrayKernels>;

/*
 * Specialised copies. JavaScriptCore profiles typed-array element accesses per compiled function;
 * one copy of a kernel that has seen both Float32Array and Float64Array compiles its loops for
 * either, and every later call pays (f64 work measured 3-4x slower after some f32 work,
 * bench/numeric-dtype.ts). So each combination of operand classes (all f64, all f32, mixed) and
 * accumulate mode gets its own copy, compiled from its own source text (a distinct source is a
 * distinct function to the engine; closures of one function would share its profile). Every copy
 * is the same code, so results are bit-identical whichever copy runs.
 */
const COPY_NAMES = ["f64", "f32", "mixed", "f64 acc-f32", "f32 acc-f32", "mixed acc-f32"] as const;
const copies: (ArrayKernels | undefined)[] = [];

function specialisedCopy(key: number): ArrayKernels {
  const make = new Function("acc32", "rev", "round32", `"use strict"; // array kernels, ${COPY_NAMES[key]} copy\nreturn (${arrayKernels.toString()})(acc32, rev, round32);`);
  return make(accumulatesInF32, sumsReversed, round32) as ArrayKernels;
}

/** The copy for these operands and the current accumulate mode. */
function kernelsFor(x: Data, y: Data, z: Data): ArrayKernels {
  const cls = x instanceof Float64Array && y instanceof Float64Array && z instanceof Float64Array ? 0
    : x instanceof Float32Array && y instanceof Float32Array && z instanceof Float32Array ? 1 : 2;
  const key = cls + (accumulatesInF32() ? 3 : 0);
  return copies[key] ?? (copies[key] = specialisedCopy(key));
}

/**
 * Under withAccumulate("tf32"): n elements of a from offset o rounded to TF32, in a fresh array of
 * a's class (offset 0), as a product operand. Otherwise never called.
 */
function tf32(a: Data, o: number, n: number): Data {
  const out = a instanceof Float32Array ? new Float32Array(n) : new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = roundTF32(a[o + i]!);
  return out;
}

/** out[m,n] = A[m,k] · B[k,n] */
export function matmul(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  if (productsInTF32()) [a, b] = [tf32(a, 0, m * k), tf32(b, 0, k * n)];
  return kernelsFor(a, b, out).matmul(a, b, m, k, n, out);
}

/** out[m,n] = A[m,k] · B[n,k]^T */
export function matmulTB(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  if (productsInTF32()) [a, b] = [tf32(a, 0, m * k), tf32(b, 0, n * k)];
  return kernelsFor(a, b, out).matmulTB(a, b, m, k, n, out);
}

/** out[m,n] = A[k,m]^T · B[k,n] */
export function matmulTA(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  if (productsInTF32()) [a, b] = [tf32(a, 0, k * m), tf32(b, 0, k * n)];
  return kernelsFor(a, b, out).matmulTA(a, b, m, k, n, out);
}

/** out[c,r] = A[r,c]^T */
export function transpose(a: Data, rows: number, cols: number, out: Data): Data {
  return kernelsFor(a, out, out).transpose(a, rows, cols, out);
}

export function dot(a: Data, b: Data, n = a.length, ao = 0, bo = 0): number {
  if (productsInTF32()) [a, b, ao, bo] = [tf32(a, ao, n), tf32(b, bo, n), 0, 0];
  return kernelsFor(a, b, b).dot(a, b, n, ao, bo);
}

/** Numerically stable logistic, no saturation cut (docs/spec/decisions.md#d6). */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

/** Numerically stable softplus ln(1+e^x), no saturation cut (D6). */
export function softplus(x: number): number {
  return Math.max(x, 0) + Math.log1p(Math.exp(-Math.abs(x)));
}

export function silu(x: number): number {
  return x * sigmoid(x);
}

export function siluPrime(x: number): number {
  const s = sigmoid(x);
  return s * (1 + x * (1 - s));
}

export function siluSecond(x: number): number {
  const s = sigmoid(x);
  return s * (1 - s) * (2 + x * (1 - 2 * s));
}

/** Row softmax (max-subtracted) of a [rows, cols] block into out. */
export function softmaxRows(x: Data, rows: number, cols: number, out: Data): Data {
  return kernelsFor(x, out, out).softmaxRows(x, rows, cols, out);
}

/** VJP of a row softmax given its output p: dx = p ⊙ (dp − ⟨dp, p⟩) per row. */
export function softmaxRowsVjp(p: Data, dp: Data, rows: number, cols: number, out: Data): Data {
  return kernelsFor(p, dp, out).softmaxRowsVjp(p, dp, rows, cols, out);
}

/** out[oo..oo+rows) = A[ao: rows x cols] · x[xo..xo+cols) */
export function matvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
  if (productsInTF32()) [A, ao, x, xo] = [tf32(A, ao, rows * cols), 0, tf32(x, xo, cols), 0];
  kernelsFor(A, x, out).matvec(A, ao, rows, cols, x, xo, out, oo);
}

/** out[oo..oo+cols) = A[ao: rows x cols]^T · x[xo..xo+rows) */
export function matTvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
  if (productsInTF32()) [A, ao, x, xo] = [tf32(A, ao, rows * cols), 0, tf32(x, xo, rows), 0];
  kernelsFor(A, x, out).matTvec(A, ao, rows, cols, x, xo, out, oo);
}

/** A[ao: rows x cols] += c · u[uo..uo+rows) w[wo..wo+cols)^T */
export function addOuter(A: Data, ao: number, rows: number, cols: number, c: number, u: Data, uo: number, w: Data, wo: number): void {
  kernelsFor(A, u, w).addOuter(A, ao, rows, cols, c, u, uo, w, wo);
}

/** Frobenius inner product of two n-element blocks. */
export function frob(A: Data, ao: number, B: Data, bo: number, n: number): number {
  return dot(A, B, n, ao, bo);
}

/** The parts one after another, in a fresh array of the dtype (f64 by default). */
export function concat(parts: readonly ArrayLike<number>[], dtype: "f64" | "f32" = "f64"): Data {
  const out = dtype === "f32" ? new Float32Array(parts.reduce((a, p) => a + p.length, 0)) : new Float64Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) for (let i = 0; i < p.length; i++) out[o++] = p[i]!;
  return out;
}

/** max_i |a_i| (0 for an empty array). */
export function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]!));
  return m;
}
