/**
 * `npm test` (conformance/npm-test.ts): the closing line is the last line of its log, and with
 * NLC_SHARD the files of tests/ are sharded too: every file in exactly one shard.
 */
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { shardFiles, testFiles } from "../conformance/npm-test.ts";
import { ROOT } from "../paths.ts";
import { runEnv } from "./run-env.ts";

test("NLC_SHARD: each file of tests/ lands in exactly one shard, the slow ones spread out", () => {
  const files = testFiles();
  expect(files.length).toBeGreaterThan(10);
  const times = Object.fromEntries(files.map((f, i) => [f, i === 0 ? 60_000 : i === 1 ? 50_000 : 1_000]));
  for (const n of [1, 2, 4]) {
    const parts = Array.from({ length: n }, (_, i) => shardFiles(files, { index: i + 1, count: n }, times));
    expect(parts.flat().sort()).toEqual([...files].sort());
    if (n > 1) expect(parts.findIndex((p) => p.includes(files[0]!))).not.toBe(parts.findIndex((p) => p.includes(files[1]!)));
  }
});

test("the closing line is the last line of the log, after bun's own summary", () => {
  // One stream, as a CI log holds it: bun's summary goes to stderr, the closing line to stdout.
  const cmd = `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "conformance", "npm-test.ts"))} conformance/conformance.test.ts 2>&1`;
  const r = Bun.spawnSync({
    cmd: ["sh", "-c", cmd], cwd: ROOT, stdout: "pipe", stderr: "pipe",
    env: { ...runEnv(), NLC_FILTER: "C8/delta/", NLC_REPORT: join(mkdtempSync(join(tmpdir(), "nlc-npmtest-")), "r.json") },
  });
  expect(r.exitCode).toBe(0);
  const lines = r.stdout.toString().trim().split("\n");
  expect(lines.at(-1)).toMatch(/^conformance: \d+ passed, 0 failed \(/);
  expect(lines.findIndex((l) => /^Ran \d+ tests? across/.test(l.trim()))).toBeGreaterThan(0);
}, 120_000);
