/**
 * `--replay … --dump DIR` (issue 35 item 6): a py: kernel's failing case written for debugging,
 * one .npy per tensor (what the kernel got, what it returned, and per compared tensor and sequence
 * the kernel's values, ref64 and the plain reference) and a manifest; the values are the ones the
 * failure message quotes. Without a replayed case, --dump is a usage error.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { npyBytes } from "../harness/dump.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { cli } from "./py-run.ts";

const hasTorch = probeTorchSync().available;
const KERNEL = "py:tests/py-kernels/f32_sums.py:chunk_gated_f64_declared";

/** The f64 values of a .npy as written by npyBytes (the header's length at bytes 8-9). */
function npyValues(buf: Uint8Array): { shape: number[]; data: Float64Array } {
  const len = buf[8]! | (buf[9]! << 8), header = new TextDecoder().decode(buf.subarray(10, 10 + len));
  const shape = /\(([^)]*)\)/.exec(header)![1]!.split(",").map((x) => x.trim()).filter((x) => x !== "").map(Number);
  return { shape, data: new Float64Array(Uint8Array.from(buf.subarray(10 + len)).buffer) };
}

test(".npy: format 1.0, header padded to 64 bytes, little-endian f64 in C order", () => {
  const b = npyBytes([2, 3], [1, 2, 3, 4, 5, 6.5]);
  expect([...b.subarray(0, 8)]).toEqual([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
  expect((10 + (b[8]! | (b[9]! << 8))) % 64).toBe(0);
  expect(npyValues(b)).toEqual({ shape: [2, 3], data: Float64Array.from([1, 2, 3, 4, 5, 6.5]) });
  expect(npyValues(npyBytes([3], [1, 2, 3])).shape).toEqual([3]);
});

test("--dump without a replayed case is a usage error naming why", () => {
  const p = cli(["--dump", "/tmp/x"]);
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain("--dump goes with --replay");
  const q = cli(["--replay", "C2/delta:1:", "--dump", "/tmp/x"]);
  expect(q.exitCode).toBe(2);
  expect(q.stderr.toString()).toContain("names none (its path is empty");
});

test("--rule R --case JSON --dump DIR: the case's inputs and the reference's outputs and gradients as .npy, equal to the document's", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-dump-"));
  const p = cli(["--rule", "moneta", "--case", '{"d":4,"seq_len":3,"seed":7}', "--out", join(dir, "case.json"), "--dump", join(dir, "npy")]);
  expect(p.exitCode).toBe(0);
  const doc = JSON.parse(readFileSync(join(dir, "case.json"), "utf8"));
  const manifest = JSON.parse(readFileSync(join(dir, "npy", "manifest.json"), "utf8"));
  expect(manifest.case.spec).toMatchObject({ d: 4, seq_len: 3, seed: 7 });
  for (const [file, t] of [["inputs/X.npy", doc.inputs.X], ["inputs/params/W_K.npy", doc.inputs.params.W_K], ["expected/y.npy", doc.expected.y], ["expected/grads/W_Q.npy", doc.expected.grads.W_Q]]) {
    const v = npyValues(readFileSync(join(dir, "npy", file)));
    expect(v.shape).toEqual(t.shape);
    expect(Array.from(v.data)).toEqual(t.data);
  }
});

test.skipIf(!hasTorch)("a failing py: case's replay with --dump writes its tensors; the dumped kernel value is the message's", () => {
  const run = cli(["--backend", KERNEL, "--filter", "C5/py-", "--rule", "gated_delta", "--profile", "quick", "--report", join(mkdtempSync(join(tmpdir(), "nlc-dump-")), "r.json")]);
  const report = JSON.parse(readFileSync(/report: (\S+)/.exec(run.stdout.toString())![1]!, "utf8"));
  const failed = report.checks.find((c: { status: string }) => c.status === "fail");
  const replay = / --replay (\S+)/.exec(failed.replay)![1]!;
  const dir = join(mkdtempSync(join(tmpdir(), "nlc-dump-")), "case");
  const p = cli(["--backend", KERNEL, "--profile", "quick", "--replay", replay, "--dump", dir]);
  expect(p.exitCode).toBe(1);
  expect(p.stdout.toString()).toContain(`dump: ${join(dir, "manifest.json")}`);
  const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
  expect(manifest).toMatchObject({ format: "nlc-dump/1", check: failed.id, status: "fail", rule: "gated_delta" });
  const files = manifest.tensors.map((t: { file: string }) => t.file);
  // named as the kernel calls them (its keywords: g for alpha), not by the wire protocol (in.k, grads.alpha)
  expect(files.filter((f: string) => /^kernel\/(sent|returned)\/(in|grads|state|dstate)\./.test(f))).toEqual([]);
  for (const f of ["kernel/sent/k.npy", "kernel/sent/g.npy", "kernel/sent/dy.npy", "kernel/returned/dg.npy", "judged/dalpha/seq0.kernel.npy", "judged/dalpha/seq0.ref64.npy", "judged/dalpha/seq0.plain.npy"]) {
    expect(files).toContain(f);
    expect(existsSync(join(dir, f))).toBe(true);
  }
  // the message: "dg [dalpha] (sequence 0): … at (b=0, t=15, h=0) (kernel 0.0026…, ref64 0.0026…)"
  const m = /^dg \[dalpha\] \(sequence (\d+)\): .* at \(b=\d+, t=(\d+), h=\d+\) \(kernel (\S+), ref64 (\S+)\)/.exec(manifest.message)!;
  const [seq, t, k, r] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
  expect(npyValues(readFileSync(join(dir, `judged/dalpha/seq${seq}.kernel.npy`))).data[t]).toBe(k);
  expect(npyValues(readFileSync(join(dir, `judged/dalpha/seq${seq}.ref64.npy`))).data[t]).toBe(r);
}, 300_000);
