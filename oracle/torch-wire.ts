/**
 * The bridge's wire format (python/PROTOCOL.md): one JSON header line, then the raw little-endian f64
 * bytes of the tensors it lists.
 */
import { Tensor, sizeOf } from "../src/tensor.ts";
import { TorchBridgeError } from "./torch-protocol.ts";

interface WireSpec {
  name: string;
  shape: number[];
  nbytes: number;
}

const LITTLE_ENDIAN = new Uint8Array(new Float64Array([1]).buffer)[7] === 0x3f;
const ENC = new TextEncoder();
const DEC = new TextDecoder();

function tensorBytes(t: Tensor): Uint8Array {
  const f64 = t.data instanceof Float64Array ? t.data : Float64Array.from(t.data);
  if (LITTLE_ENDIAN) return new Uint8Array(f64.buffer, f64.byteOffset, f64.byteLength);
  const out = new Uint8Array(f64.length * 8);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < f64.length; i++) dv.setFloat64(i * 8, f64[i]!, true);
  return out;
}

function bytesTensor(shape: number[], bytes: Uint8Array): Tensor {
  const n = sizeOf(shape);
  let data: Float64Array;
  if (LITTLE_ENDIAN) data = new Float64Array(bytes.slice().buffer, 0, n);
  else {
    data = new Float64Array(n);
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < n; i++) data[i] = dv.getFloat64(i * 8, true);
  }
  return new Tensor("f64", shape, data);
}

export function encode(header: Record<string, unknown>, tensors: readonly [string, Tensor][]): Uint8Array {
  const specs: WireSpec[] = [];
  const blobs: Uint8Array[] = [];
  for (const [name, t] of tensors) {
    const b = tensorBytes(t);
    specs.push({ name, shape: [...t.shape], nbytes: b.byteLength });
    blobs.push(b);
  }
  const head = ENC.encode(JSON.stringify({ ...header, tensors: specs }) + "\n");
  const total = head.byteLength + blobs.reduce((a, b) => a + b.byteLength, 0);
  const out = new Uint8Array(total);
  out.set(head, 0);
  let o = head.byteLength;
  for (const b of blobs) {
    out.set(b, o);
    o += b.byteLength;
  }
  return out;
}

export interface Message {
  header: Record<string, any>;
  tensors: Map<string, Tensor>;
}

/** Incremental decoder of the reply stream. */
export class Decoder {
  private buf = new Uint8Array(1 << 16);
  private len = 0;
  private head: Record<string, any> | null = null;
  private need = 0;

  push(chunk: Uint8Array): void {
    if (this.len + chunk.byteLength > this.buf.byteLength) {
      const nb = new Uint8Array(Math.max(this.buf.byteLength * 2, this.len + chunk.byteLength));
      nb.set(this.buf.subarray(0, this.len));
      this.buf = nb;
    }
    this.buf.set(chunk, this.len);
    this.len += chunk.byteLength;
  }

  /** The next complete message, or null. Throws on a malformed header. */
  next(): Message | null {
    if (this.head === null) {
      const nl = this.buf.subarray(0, this.len).indexOf(10);
      if (nl < 0) return null;
      const line = DEC.decode(this.buf.subarray(0, nl));
      this.consume(nl + 1);
      let h: unknown;
      try {
        h = JSON.parse(line);
      } catch {
        throw new TorchBridgeError("protocol", `torch bridge: reply header is not JSON: ${line.slice(0, 200)}`);
      }
      if (typeof h !== "object" || h === null || !Array.isArray((h as any).tensors)) {
        throw new TorchBridgeError("protocol", `torch bridge: reply header without a tensors list: ${line.slice(0, 200)}`);
      }
      this.head = h as Record<string, any>;
      this.need = (this.head.tensors as WireSpec[]).reduce((a, s) => a + s.nbytes, 0);
    }
    if (this.len < this.need) return null;
    const tensors = new Map<string, Tensor>();
    let o = 0;
    for (const s of this.head.tensors as WireSpec[]) {
      tensors.set(s.name, bytesTensor(s.shape, this.buf.subarray(o, o + s.nbytes)));
      o += s.nbytes;
    }
    this.consume(this.need);
    const msg = { header: this.head, tensors };
    this.head = null;
    this.need = 0;
    return msg;
  }

  private consume(n: number): void {
    this.buf.copyWithin(0, n, this.len);
    this.len -= n;
  }
}
