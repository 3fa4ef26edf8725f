/**
 * `npm test` (conformance/npm-test.ts): the closing line is the last line of its log, and with
 * NLC_SHARD the files of tests/ are sharded too: every file in exactly one shard.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { shardFiles, testFiles, testNamePattern } from "../conformance/npm-test.ts";
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

test("-t / --test-name-pattern is read as bun test reads it", () => {
  expect(testNamePattern([])).toBeUndefined();
  expect(testNamePattern(["-t", "C2/delta"])).toBe("C2/delta");
  expect(testNamePattern(["--test-name-pattern", "a|b", "tests/x.test.ts"])).toBe("a|b");
  expect(testNamePattern(["--test-name-pattern=C5/"])).toBe("C5/");
  expect(testNamePattern(["-t", "one", "-t", "two"])).toBe("two");
});

test("npm test -- -t PATTERN runs only the conformance checks the pattern names, and says so when it names none", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-npmtest-t-"));
  const run = (pattern: string) => {
    const cmd = `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "conformance", "npm-test.ts"))} conformance/conformance.test.ts -t ${JSON.stringify(pattern)} 2>&1`;
    return Bun.spawnSync({ cmd: ["sh", "-c", cmd], cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...runEnv(), NLC_FILTER: "C8/", NLC_REPORT: join(dir, `${pattern.length}.json`) } });
  };
  const some = run("C8/delta/write-read");
  expect(some.exitCode).toBe(0);
  const report = JSON.parse(readFileSync(join(dir, `${"C8/delta/write-read".length}.json`), "utf8")) as { checks: { id: string }[] };
  expect(report.checks.map((c) => c.id)).toEqual(["C8/delta/write-read-identity"]);
  expect(some.stdout.toString().trim().split("\n").at(-1)).toBe("conformance: 1 passed, 0 failed (0 fail, 0 vacuous, 0 error, 0 skipped)");
  const none = run("no-check-is-named-so");
  expect(none.exitCode).toBe(0);
  expect(none.stdout.toString().trim().split("\n").at(-1)).toBe("conformance: no check matches -t no-check-is-named-so; none was run");
}, 120_000);
