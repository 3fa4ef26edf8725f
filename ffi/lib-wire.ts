/**
 * How a tensor crosses the nlk ABI (docs/spec/kernel-abi.md, docs/spec/precision.md#wire): the wire
 * dtype a declared dtype travels in, its bits, and the library's memory (nlk_alloc, nlk_copy_in/out)
 * with the conversions to and from that dtype and the NaN fill of outputs.
 */
import { roundTo, type StorageDType } from "../src/precision.ts";
import type { Fn, LibMemory } from "./lib-types.ts";

/**
 * A declared dtype name as the dtype a tensor crosses the ABI in: 2-byte bf16 or f16, else 4-byte
 * f32 (f32 itself, and anything unknown or wider: the bound covers f64 as f32).
 */
export function wireDType(name: string): StorageDType {
  return name === "bf16" || name === "f16" ? name : "f32";
}

export const BYTES: Readonly<Record<StorageDType, number>> = { f32: 4, bf16: 2, f16: 2 };

/**
 * f32 values in a wire dtype's bits. bf16 is the upper half of the f32 bits of the value rounded
 * to bf16 (src/precision.ts roundTo, round to nearest even; a NaN is the quiet NaN 0x7fc0); f16
 * goes through the platform's Float16Array (round to nearest even). Every value the harness sends
 * is already representable (C5 rounds its inputs first), so the rounding here matters only for NaN
 * fills and for callers that pass wider values.
 */
export function encode(dtype: StorageDType, data: Float32Array): Float32Array | Uint16Array {
  if (dtype === "f32") return data;
  if (dtype === "f16") return new Uint16Array(new Float16Array(data).buffer);
  const rounded = Float32Array.from(data, (x) => roundTo("bf16", x)), u = new Uint32Array(rounded.buffer);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < u.length; i++) out[i] = Number.isNaN(rounded[i]!) ? 0x7fc0 : u[i]! >>> 16;
  return out;
}

/** A wire dtype's bits as f32 values (exact: bf16 and f16 values are all f32 values). */
export function decode(dtype: StorageDType, bits: Float32Array | Uint16Array): Float32Array {
  if (dtype === "f32") return bits as Float32Array;
  if (dtype === "f16") return new Float32Array(new Float16Array(bits.buffer, bits.byteOffset, bits.length));
  const out = new Float32Array(bits.length), u = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) u[i] = bits[i]! << 16;
  return out;
}

/** Library memory: allocation, copies (converting to and from the wire dtype), NaN fill. */
export class Memory implements LibMemory {
  constructor(private readonly s: Record<string, Fn>, private readonly check: (sym: string, st: number) => void) {}
  alloc(bytes: number): number {
    const out = new BigUint64Array(1);
    this.check("nlk_alloc", this.s.nlk_alloc!(bytes, out));
    return Number(out[0]!);
  }
  free(p: number | null): void {
    if (p !== null) this.check("nlk_free", this.s.nlk_free!(p));
  }
  upload(data: Float32Array, dtype: StorageDType = "f32"): number {
    const bits = encode(dtype, data);
    const p = this.alloc(bits.byteLength);
    if (bits.byteLength > 0) this.check("nlk_copy_in", this.s.nlk_copy_in!(p, bits, bits.byteLength));
    return p;
  }
  download(p: number, n: number, dtype: StorageDType = "f32"): Float32Array {
    const bits = dtype === "f32" ? new Float32Array(n) : new Uint16Array(n);
    if (n > 0) this.check("nlk_copy_out", this.s.nlk_copy_out!(bits, p, n * BYTES[dtype]));
    return decode(dtype, bits);
  }
  /** Raw bits into a fresh buffer of their size. */
  uploadBits(bits: Uint32Array | Uint16Array): number {
    const p = this.alloc(bits.byteLength);
    if (bits.byteLength > 0) this.check("nlk_copy_in", this.s.nlk_copy_in!(p, bits, bits.byteLength));
    return p;
  }
  /** n elements of a dtype's width as raw bits. */
  downloadBits(p: number, n: number, dtype: StorageDType): Uint32Array | Uint16Array {
    const bits = dtype === "f32" ? new Uint32Array(n) : new Uint16Array(n);
    if (n > 0) this.check("nlk_copy_out", this.s.nlk_copy_out!(bits, p, n * BYTES[dtype]));
    return bits;
  }
  /** An output buffer of n elements, filled with NaN so that an element the kernel does not write shows. */
  nanBuffer(n: number, dtype: StorageDType = "f32"): number {
    return this.upload(new Float32Array(n).fill(Number.NaN), dtype);
  }
}

/** Bits of a wire dtype's values, as unsigned integers of its width. */
export function rawBits(dtype: StorageDType, data: Float32Array): Uint32Array | Uint16Array {
  const e = encode(dtype, data);
  return e instanceof Float32Array ? new Uint32Array(e.buffer, e.byteOffset, e.length) : e;
}
