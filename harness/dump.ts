/**
 * `--replay … --dump DIR`: the replayed case's tensors written for debugging outside the suite,
 * one `.npy` file each (numpy.load, torch.from_numpy; little-endian f64, C order) and
 * `DIR/manifest.json` listing them: what was sent to the kernel, what it returned, and the
 * references it was judged against (docs/spec/conformance.md#dump).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** A `.npy` (format 1.0) of f64 values in C order. */
export function npyBytes(shape: readonly number[], data: ArrayLike<number>): Uint8Array {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(", ");
  let header = `{'descr': '<f8', 'fortran_order': False, 'shape': (${dims}), }`;
  // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending in \n
  const pad = 64 - ((10 + header.length + 1) % 64);
  header = header + " ".repeat(pad % 64) + "\n";
  const head = new TextEncoder().encode(header);
  const out = new Uint8Array(10 + head.length + 8 * data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, head.length & 0xff, head.length >> 8], 0);
  out.set(head, 10);
  const view = new DataView(out.buffer, 10 + head.length);
  for (let i = 0; i < data.length; i++) view.setFloat64(8 * i, data[i]!, true);
  return out;
}

interface DumpEntry {
  readonly file: string;
  readonly shape: readonly number[];
  readonly what: string;
}

/** The files of one dump, written as they come; `finish` writes the manifest. */
export class CaseDump {
  private readonly entries: DumpEntry[] = [];

  constructor(readonly dir: string) {}

  tensor(file: string, shape: readonly number[], data: ArrayLike<number>, what: string): void {
    const count = shape.reduce((a, b) => a * b, 1);
    if (count !== data.length) throw new Error(`dump ${file}: shape [${shape.join(", ")}] holds ${count} values, got ${data.length}`);
    const path = join(this.dir, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, npyBytes(shape, data));
    this.entries.push({ file, shape: [...shape], what });
  }

  finish(about: Record<string, unknown>): string {
    mkdirSync(this.dir, { recursive: true });
    const path = join(this.dir, "manifest.json");
    writeFileSync(path, `${JSON.stringify({ format: "nlc-dump/1", ...about, tensors: this.entries }, null, 1)}\n`);
    return path;
  }
}
