/**
 * bench/kernel-bitwise.ts, the byte-for-byte comparison of two kernel libraries that a refactor of
 * cuda/ is checked with (cuda/README.md "Notes from the ports"), says "identical" for one library
 * against itself and finds the differences between two libraries that do differ: the default cpu
 * build (f64 sums) against cpu-f32 (f32 sums).
 */
import { beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";

import { buildLib } from "../ffi/build.ts";
import { ROOT } from "../paths.ts";

let cpu: string, cpuF32: string;

beforeAll(async () => {
  cpu = (await buildLib("cpu")).path;
  cpuF32 = (await buildLib("cpu-f32")).path;
}, 600_000);

function compare(...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [join(ROOT, "bench/kernel-bitwise.ts"), ...args], { encoding: "utf8" });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test("one library against itself: every call identical", () => {
  const { status, out } = compare(cpu, cpu);
  expect(out).toMatch(/^\d+ calls \(0 of them returned an error status\), \d+ bytes compared: identical$/m);
  expect(Number(/^(\d+) calls/m.exec(out)![1])).toBeGreaterThan(1000);
  expect(status).toBe(0);
}, 120_000);

test("f64 sums against f32 sums: the differences are found and named", () => {
  const { status, out } = compare(cpu, cpuF32, "--rules", "delta");
  expect(out).toMatch(/bytes compared: \d+ differences/);
  expect(out).toMatch(/delta B1 T7 H1 d1 cfg0 C1 forward: y differs first at \[\d+\]/);
  expect(status).toBe(1);
}, 120_000);

test("an unknown rule is a usage error naming it", () => {
  const { status, out } = compare(cpu, cpu, "--rules", "deltaa");
  expect(out).toContain("--rules: unknown rule deltaa");
  expect(status).toBe(2);
});
