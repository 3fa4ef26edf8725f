/** Deterministic random numbers: every input the suite makes comes from a seed. */

/** splitmix32-style generator; small state, good enough statistics for test inputs. */
import { Tensor, type DType } from "./tensor.ts";

export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1), 32 random bits. */
  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  }

  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  int(lo: number, hiInclusive: number): number {
    return lo + Math.floor(this.next() * (hiInclusive - lo + 1));
  }

  fill(out: Float64Array | Float32Array, lo: number, hi: number): void {
    for (let i = 0; i < out.length; i++) out[i] = this.uniform(lo, hi);
  }
}

/**
 * The rule-init hash of the spec (docs/spec/fixtures.md#rule-state): fround(u32) / 2^32 with
 * u32 = (i * 2654435761) mod 2^32, rounded to f32 in both dtypes.
 */
export function initHash(i: number): number {
  return Math.fround(Math.imul(i, 2654435761 | 0) >>> 0) / 4294967296;
}

/** A tensor of independent U(lo, hi) draws, in row-major order. */
export function uniformTensor(dtype: DType, shape: readonly number[], rng: Rng, lo: number, hi: number): Tensor {
  const t = new Tensor(dtype, shape);
  for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
  return t;
}

/** 32-bit FNV-1a of a text, from `basis` (the standard offset basis by default). */
export function fnv1a(text: string, basis = 0x811c9dc5): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** A positive 31-bit seed named by a text (e.g. a fixture id): stable whatever else exists. */
export function seedFromText(text: string): number {
  return fnv1a(text) & 0x7fffffff || 1;
}
