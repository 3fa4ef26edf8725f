/**
 * How a kernel case's sequences are laid out in a batch (docs/spec/kernel-abi.md#shapes): per-token
 * tensors [B, T, H, w] (sequence n = b·H + h at [b, :, h]), states [B, H, ...] contiguous per
 * sequence, and a packed variable-length batch [1, ΣL, H, w] with its offsets `cu_seqlens`
 * (docs/spec/py-backend.md#packed); the width of each per-token tensor (gates, token rows).
 */
import { isTokenGate, rowsPerToken, type RuleAbi } from "../ffi/abi.ts";

/** The offsets of packed sequences of these lengths: [0, L1, L1 + L2, ..., ΣL]. */
export function cuSeqlens(lengths: readonly number[]): number[] {
  const cu = [0];
  for (const L of lengths) cu.push(cu[cu.length - 1]! + L);
  return cu;
}

/** Per-sequence [L_i, w] arrays (sequence n = i·H + h) as one packed tensor [1, ΣL, H, w] (written into `out`). */
export function packPackedTokens<A extends NumArray>(parts: readonly ArrayLike<number>[], lengths: readonly number[], H: number, w: number, out: A): A {
  const cu = cuSeqlens(lengths);
  lengths.forEach((L, i) => {
    for (let h = 0; h < H; h++) {
      const p = parts[i * H + h]!;
      for (let t = 0; t < L; t++) for (let j = 0; j < w; j++) out[((cu[i]! + t) * H + h) * w + j] = p[t * w + j]!;
    }
  });
  return out;
}

/** Sequence n's [L_i, w] values of a packed tensor [1, ΣL, H, w] (written into `out`, L_i·w long). */
export function unpackPackedTokens<A extends NumArray>(a: ArrayLike<number>, lengths: readonly number[], H: number, w: number, n: number, out: A): A {
  const i = Math.floor(n / H), h = n % H, start = cuSeqlens(lengths)[i]!;
  for (let t = 0; t < lengths[i]!; t++) for (let j = 0; j < w; j++) out[t * w + j] = a[((start + t) * H + h) * w + j]!;
  return out;
}

/** The sizes of a batch: B batches × H heads of T tokens. */
export interface BatchDims {
  readonly B: number;
  readonly T: number;
  readonly H: number;
}

/** A writable array of numbers (what the packers fill). */
export interface NumArray {
  readonly length: number;
  [i: number]: number;
}

/**
 * Whether rule a's per-token tensor is a gate (alpha, theta, eta) or a gate's gradient (dalpha, ...)
 * with one value per token (a channel gate has d: ffi/abi.ts isTokenGate).
 */
export const isGateTensor = (a: Pick<RuleAbi, "channelGates">, name: string): boolean => isTokenGate(a, name);

/**
 * Values per token of rule a's per-token tensor: 1 for a token gate or its gradient, else d; times
 * the rows per token of an input in the ABI row's tokenRows (n_h for Gated DeltaProduct's k, v,
 * theta), read from the call's `hyper` (docs/spec/kernel-abi.md#token-rows).
 */
export function tokenWidth(a: Pick<RuleAbi, "channelGates"> & Partial<Pick<RuleAbi, "tokenRows" | "rule">>, name: string, d: number,
  hyper?: Readonly<Record<string, number | string>>): number {
  const rows = a.tokenRows === undefined ? 1 : rowsPerToken({ rule: a.rule ?? "?", tokenRows: a.tokenRows }, name, hyper);
  return rows * (isGateTensor(a, name) ? 1 : d);
}

/** Per-sequence [T, w] arrays as one ABI tensor [B, T, H, w] (written into `out`). */
export function packTokens<A extends NumArray>(parts: readonly ArrayLike<number>[], s: BatchDims, w: number, out: A): A {
  const { B, T, H } = s;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      const p = parts[b * H + h]!;
      for (let t = 0; t < T; t++) for (let i = 0; i < w; i++) out[((b * T + t) * H + h) * w + i] = p[t * w + i]!;
    }
  return out;
}

/** Sequence n's [T, w] values of an ABI tensor [B, T, H, w] (written into `out`, T·w long). */
export function unpackTokens<A extends NumArray>(a: ArrayLike<number>, s: BatchDims, w: number, n: number, out: A): A {
  const { T, H } = s;
  const b = Math.floor(n / H), h = n % H;
  for (let t = 0; t < T; t++) for (let i = 0; i < w; i++) out[t * w + i] = a[((b * T + t) * H + h) * w + i]!;
  return out;
}

/** Per-sequence blocks as one tensor whose leading dimensions enumerate the sequences ([B, H, ...] or [N, ...]). */
export function packStates<A extends NumArray>(parts: readonly ArrayLike<number>[], out: A): A {
  let at = 0;
  for (const p of parts) for (let i = 0; i < p.length; i++) out[at++] = p[i]!;
  return out;
}

/** Sequence n's block (a copy) of a tensor whose leading dimensions enumerate `count` sequences. */
export function unpackState<A extends Float32Array | Float64Array>(a: A, count: number, n: number): A {
  const per = a.length / count;
  return a.slice(n * per, (n + 1) * per) as A;
}
