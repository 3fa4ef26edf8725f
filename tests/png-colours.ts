/** Distinct colours of an 8-bit RGB/RGBA PNG (enough to tell a rendered page from a blank one). */
import { inflateSync } from "node:zlib";

export function pngColourCount(buf: Uint8Array, cap = 64): number {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (view.getUint32(0) !== 0x89504e47) throw new Error("not a PNG");
  let width = 0, height = 0, channels = 0;
  const idat: Uint8Array[] = [];
  for (let at = 8; at < buf.length;) {
    const len = view.getUint32(at), type = String.fromCharCode(...buf.subarray(at + 4, at + 8));
    const body = buf.subarray(at + 8, at + 8 + len);
    if (type === "IHDR") {
      width = view.getUint32(at + 8);
      height = view.getUint32(at + 12);
      const depth = body[8], colour = body[9];
      if (depth !== 8 || (colour !== 2 && colour !== 6)) throw new Error(`PNG depth ${depth} colour type ${colour} not handled`);
      channels = colour === 2 ? 3 : 4;
    } else if (type === "IDAT") idat.push(body);
    at += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  let prev = new Uint8Array(stride);
  const seen = new Set<number>();
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? cur[i - channels]! : 0, b = prev[i]!, c = i >= channels ? prev[i - channels]! : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const pred = filter === 0 ? 0 : filter === 1 ? a : filter === 2 ? b : filter === 3 ? (a + b) >> 1 : pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      cur[i] = (line[i]! + pred) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      seen.add((cur[x * channels]! << 16) | (cur[x * channels + 1]! << 8) | cur[x * channels + 2]!);
      if (seen.size >= cap) return seen.size;
    }
    prev = cur;
  }
  return seen.size;
}
