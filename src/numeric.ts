/**
 * Numeric kernels on flat row-major typed arrays. Every function writes into a fresh or a
 * caller-owned output and never into its inputs. Loops accumulate in a JS number (f64) and
 * store once, so f32 storage rounds exactly once per output element.
 */
import type { Data } from "./tensor.ts";

/** out[m,n] = A[m,k] · B[k,n] */
export function matmul(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  const acc = new Float64Array(n);
  for (let i = 0; i < m; i++) {
    acc.fill(0);
    const ai = i * k;
    for (let p = 0; p < k; p++) {
      const av = a[ai + p]!;
      if (av === 0) continue;
      const bp = p * n;
      for (let j = 0; j < n; j++) acc[j]! += av * b[bp + j]!;
    }
    const oi = i * n;
    for (let j = 0; j < n; j++) out[oi + j] = acc[j]!;
  }
  return out;
}

/** out[m,n] = A[m,k] · B[n,k]^T */
export function matmulTB(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  for (let i = 0; i < m; i++) {
    const ai = i * k;
    for (let j = 0; j < n; j++) {
      const bj = j * k;
      let s = 0;
      for (let p = 0; p < k; p++) s += a[ai + p]! * b[bj + p]!;
      out[i * n + j] = s;
    }
  }
  return out;
}

/** out[m,n] = A[k,m]^T · B[k,n] */
export function matmulTA(a: Data, b: Data, m: number, k: number, n: number, out: Data): Data {
  const acc = new Float64Array(m * n);
  for (let p = 0; p < k; p++) {
    const ap = p * m;
    const bp = p * n;
    for (let i = 0; i < m; i++) {
      const av = a[ap + i]!;
      if (av === 0) continue;
      const oi = i * n;
      for (let j = 0; j < n; j++) acc[oi + j]! += av * b[bp + j]!;
    }
  }
  out.set(acc);
  return out;
}

/** out[c,r] = A[r,c]^T */
export function transpose(a: Data, rows: number, cols: number, out: Data): Data {
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = a[i * cols + j]!;
  return out;
}

export function dot(a: Data, b: Data, n = a.length, ao = 0, bo = 0): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += a[ao + i]! * b[bo + i]!;
  return s;
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
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let mx = -Infinity;
    for (let j = 0; j < cols; j++) mx = Math.max(mx, x[o + j]!);
    let sum = 0;
    for (let j = 0; j < cols; j++) sum += Math.exp(x[o + j]! - mx);
    for (let j = 0; j < cols; j++) out[o + j] = Math.exp(x[o + j]! - mx) / sum;
  }
  return out;
}

/** VJP of a row softmax given its output p: dx = p ⊙ (dp − ⟨dp, p⟩) per row. */
export function softmaxRowsVjp(p: Data, dp: Data, rows: number, cols: number, out: Data): Data {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let s = 0;
    for (let j = 0; j < cols; j++) s += dp[o + j]! * p[o + j]!;
    for (let j = 0; j < cols; j++) out[o + j] = p[o + j]! * (dp[o + j]! - s);
  }
  return out;
}

// ── small dense helpers for the rules' inner loops (offsets address rows inside flat buffers) ──

/** out[oo..oo+rows) = A[ao: rows x cols] · x[xo..xo+cols) */
export function matvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
  for (let i = 0; i < rows; i++) {
    let s = 0;
    const r = ao + i * cols;
    for (let j = 0; j < cols; j++) s += A[r + j]! * x[xo + j]!;
    out[oo + i] = s;
  }
}

/** out[oo..oo+cols) = A[ao: rows x cols]^T · x[xo..xo+rows) */
export function matTvec(A: Data, ao: number, rows: number, cols: number, x: Data, xo: number, out: Data, oo = 0): void {
  // Accumulate in f64 scratch and store once, so f32 outputs round once per element.
  if (scratch.length < cols) scratch = new Float64Array(cols * 2);
  const acc = scratch;
  acc.fill(0, 0, cols);
  for (let i = 0; i < rows; i++) {
    const xi = x[xo + i]!;
    if (xi === 0) continue;
    const r = ao + i * cols;
    for (let j = 0; j < cols; j++) acc[j]! += A[r + j]! * xi;
  }
  for (let j = 0; j < cols; j++) out[oo + j] = acc[j]!;
}
let scratch = new Float64Array(64);

/** A[ao: rows x cols] += c · u[uo..uo+rows) w[wo..wo+cols)^T */
export function addOuter(A: Data, ao: number, rows: number, cols: number, c: number, u: Data, uo: number, w: Data, wo: number): void {
  for (let i = 0; i < rows; i++) {
    const ui = c * u[uo + i]!;
    if (ui === 0) continue;
    const r = ao + i * cols;
    for (let j = 0; j < cols; j++) A[r + j]! += ui * w[wo + j]!;
  }
}

/** Frobenius inner product of two n-element blocks. */
export function frob(A: Data, ao: number, B: Data, bo: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += A[ao + i]! * B[bo + i]!;
  return s;
}

/** max_i |a_i| (0 for an empty array). */
export function maxAbs(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]!));
  return m;
}
