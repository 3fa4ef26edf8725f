/**
 * The hang check's limit starts when the planted call starts, not when the child process does
 * (harness/call-watchdog.ts, docs/spec/kernel-abi.md#isolation): with a limit of 300 ms — shorter
 * than the child's own start-up (Bun, the catalogue, loading the library) — the planted hang still
 * becomes an `error` of that check naming the timeout. A limit that counted the start-up would
 * end the child before the check began ("not run").
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { plantedEntry } from "../conformance/kernel/native/plan.ts";
import { runChild } from "../conformance/kernel/native/spawn.ts";

test("a planted hang is killed 300 ms after its call starts, whatever the child's start-up took", () => {
  const build = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "ffi", "build.ts"), "cpu", "cpu-test"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) return; // no C++ compiler: cpu-emu is not built here
  const part = plantedEntry("cpu-emu", "hang"), id = part.id;
  const t0 = performance.now();
  const out = runChild({ backend: "cpu-emu", profile: "quick", runSeed: 1, checks: [{ id, part }], callTimeoutMs: 300 });
  const r = out.get(id)!;
  expect(r.status).toBe("error");
  expect(r.message).toContain("timed out after 300 ms from the start of the call (killed) during this check");
  // the child's start-up came first and did not count against the 300 ms
  expect(performance.now() - t0).toBeGreaterThan(300);
  // a limit on the whole child, start-up included (as the hang check had it), shorter than the
  // start-up never reaches the call (1 ms: a quiet machine starts the child in under 300 ms)
  const whole = runChild({ backend: "cpu-emu", profile: "quick", runSeed: 1, checks: [{ id, part }], timeoutMs: 1 }).get(id)!;
  expect(whole.status).toBe("error");
  expect(whole.message).toMatch(/^not run: .*timed out after 0 s \(killed\)/);
}, 120_000);
