/**
 * Replay lines carry every option their check depends on and reproduce its verdict when run
 * verbatim through npm (no global Bun): a failing C6 fixture from a directory given with --fixtures,
 * a C5 check on a `lib:` backend, and a check run under a profile other than the default.
 */
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { replayArgsOf } from "../harness/replay-command.ts";
import { ROOT } from "../paths.ts";

function cli(...args: string[]) {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: ROOT });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

/** Runs a report's replay command exactly as printed, in a shell, from the repository root. */
function replay(line: string) {
  const r = Bun.spawnSync({ cmd: ["sh", "-c", line], cwd: ROOT, env: { ...process.env, npm_config_loglevel: "silent" } });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

function onlyCheck(reportPath: string): CheckResult {
  const checks = JSON.parse(readFileSync(reportPath, "utf8")).checks as CheckResult[];
  expect(checks.length).toBe(1);
  return checks[0]!;
}

/** The replayed run's line for the check: `[1/1] <status> <id>`. */
function replayedStatus(out: string, id: string): string | undefined {
  return new RegExp(`\\[1/1\\] (\\w+)\\s+${id.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} `).exec(out)?.[1];
}

test("the replay arguments name the backend and the profile, the default too (a config's profile must not apply on replay)", () => {
  const def = { id: "C5/lib-x/delta/forward", class: "C5", kind: "skipped", reason: "", spec: "", tolerance: {}, subject: { backend: "lib:/opt/x.so" } } as const;
  expect(replayArgsOf(def, "deep")).toEqual(["--backend", "lib:/opt/x.so", "--profile", "deep"]);
  expect(replayArgsOf({ ...def, subject: {}, replayArgs: ["--fixtures", "/d"] }, "default")).toEqual(["--fixtures", "/d", "--profile", "default"]);
});

test("a failing C6 fixture from a --fixtures directory: its replay line fails the same way", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-replay-fx-"));
  const doc = JSON.parse(readFileSync(join(ROOT, "fixtures", "golden", "rule-delta.json"), "utf8"));
  doc.id = "planted-delta";
  doc.expected.y.data[0] += 1e-3; // the planted defect: one expected output off
  writeFileSync(join(dir, "planted-delta.json"), JSON.stringify(doc));
  const report = join(dir, "r.json");
  expect(cli("--fixtures", dir, "--filter", "C6/planted-delta", "--report", report).code).toBe(1);
  const c = onlyCheck(report);
  expect(c.status).toBe("fail");
  expect(c.replay).toContain(`--fixtures ${dir}`);
  expect(c.replay.startsWith("npm run conformance -- ")).toBe(true);
  const r = replay(c.replay);
  expect(r.code).toBe(1);
  expect(replayedStatus(r.out, c.id)).toBe("fail");
  expect(r.out).toContain(c.message!.split(" ")[0]!);
}, 120_000);

test("a check under --profile quick: its replay line carries the profile and gives the same verdict", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-replay-q-"));
  const report = join(dir, "r.json");
  cli("--filter", "C2/delta.frozen", "--profile", "quick", "--report", report);
  const c = onlyCheck(report);
  expect(c.replay).toContain("--profile quick");
  const r = replay(c.replay);
  expect(replayedStatus(r.out, c.id)).toBe(c.status);
}, 120_000);

test("a C5 check on a lib: backend: its replay line names the backend and gives the same verdict", () => {
  const built = join(ROOT, "build", "libnlk-cpu.so");
  if (!existsSync(built)) expect(Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "ffi", "build.ts"), "cpu"], cwd: ROOT }).exitCode).toBe(0);
  const dir = mkdtempSync(join(tmpdir(), "nlc-replay-lib-"));
  const lib = join(dir, "libmine.so");
  copyFileSync(built, lib);
  const report = join(dir, "r.json");
  cli("--backend", `lib:${lib}`, "--filter", "C5/lib-libmine/delta/forward", "--report", report);
  const c = onlyCheck(report);
  expect(c.replay).toContain(`--backend lib:${lib}`);
  const r = replay(c.replay);
  expect(r.out).not.toContain("no check with id");
  expect(replayedStatus(r.out, c.id)).toBe(c.status);
}, 300_000);
