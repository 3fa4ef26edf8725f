/**
 * One kernel that crashes costs one check (harness/child-process.ts): a library whose backward
 * segfaults (tests/libs/crash-backward.cpp, the Delta example with a null write in its backward)
 * run through C5. Each check that calls the backward is an `error` naming the kernel, the signal
 * and the case; the checks after it run in a fresh child (the forward and the size query pass),
 * the rules the library does not export are skipped, and no message carries Bun's crash banner.
 */
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { childStderr } from "../harness/child-process.ts";
import { ROOT } from "../paths.ts";

const LIB = join(ROOT, "build", "test-libs", "libcrash_backward.so");
const SLUG = "C5/lib-libcrash_backward";
/** The checks of a pair that call its backward. */
const CALLS_BACKWARD = ["backward", "checkpoint", "chunks", "tape-e2e"];

function buildLib(): void {
  mkdirSync(join(ROOT, "build", "test-libs"), { recursive: true });
  const cc = Bun.spawnSync({
    cmd: ["g++", "-std=c++17", "-O0", "-shared", "-fPIC", "-I", join(ROOT, "ffi"), "-o", LIB, join(ROOT, "tests", "libs", "crash-backward.cpp")],
    stdout: "pipe", stderr: "pipe",
  });
  if (cc.exitCode !== 0) throw new Error(`building ${LIB} failed: ${cc.stderr.toString()}`);
}

test("a segfaulting backward: one error per check that calls it, the rest run, unexported rules are no checks", () => {
  buildLib();
  const dir = mkdtempSync(join(tmpdir(), "nlc-crash-"));
  try {
    const report = join(dir, "r.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", "--backend", `lib:${LIB}`, "--filter", "C5/lib", "--profile", "quick", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(1);
    const checks = (JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks;
    const by = new Map(checks.map((c) => [c.id, c]));
    for (const kind of CALLS_BACKWARD) {
      const r = by.get(`${SLUG}/delta/${kind}`)!;
      expect(r.status).toBe("error");
      expect(r.message).toMatch(/^kernel nlk_delta_backward \(backend lib:.*\): the checking process killed by SIGSEGV during this check, on the case seed \d+, path \d+/);
      expect(r.message).toContain("replay: ");
    }
    for (const kind of ["forward", "workspace"]) expect(`${kind}: ${by.get(`${SLUG}/delta/${kind}`)!.status}`).toBe(`${kind}: pass`);
    // the rules the library does not export are no checks of the run (docs/spec/conformance.md#undeclared)
    expect(checks.filter((c) => !c.id.startsWith(`${SLUG}/delta/`)).map((c) => c.id)).toEqual([]);
    expect(p.stdout.toString() + p.stderr.toString()).toMatch(/not implemented|does not implement|no checks/i);
    for (const c of checks) expect(c.message ?? "").not.toMatch(/bug in Bun|Bun has crashed|bun\.report/i);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);

test("Bun's crash banner is reduced to the line that says what happened", () => {
  const banner = [
    "loading the library", "============================================================", "Bun v1.4.5 (a7733435c) Linux x64",
    "Args: \"bun\" \"conformance/kernel/child.ts\" \"native\"", "panic(main thread): Segmentation fault at address 0x0",
    "oh no: Bun has crashed. This indicates a bug in Bun, not your code.", "", " https://bun.report/1.4.5/abc",
  ].join("\n");
  expect(childStderr(banner)).toBe("loading the library\npanic: Segmentation fault at address 0x0 (a fault in native kernel code; Bun's crash handler reports it as its own)");
  expect(childStderr("Traceback: ValueError\n")).toBe("Traceback: ValueError");
});
