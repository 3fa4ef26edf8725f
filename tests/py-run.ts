/**
 * One CLI run over many `py:` backends for a test file, started on first use (a Python host per
 * backend is slow: a file pays for one run), and its results by backend, rule and phase.
 */
import { expect } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { parsePyBackend } from "../conformance/kernel/python/plan.ts";

/** `npm run conformance -- ARGS` in the repository root, with extra environment. */
export function cli(args: string[], env: Record<string, string> = {}) {
  return Bun.spawnSync({ cmd: [process.execPath, "conformance/cli.ts", ...args], cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
}

export function expectStatus(r: CheckResult, want: string): void {
  expect(r.status === want ? want : `${r.status}: ${r.message}`).toBe(want);
}

/**
 * A check of a backend that could not be loaded (docs/spec/conformance.md#nothing-ran): skipped,
 * the load error given once with the backend and carried in details.unavailable.
 */
export function expectUnavailable(r: CheckResult, text: string): void {
  expectStatus(r, "skip");
  expect(String(r.details?.unavailable ?? r.message)).toContain(text);
}

/**
 * The C5 `py:` checks of `backends` at the quick profile, run once when first asked for; the run
 * must exit `exitCode` (default 1: the lists hold planted kernels). `get` names a missing result.
 */
export function pyRun(backends: () => string[], env: Record<string, string> = {}, exitCode = 1) {
  let byId: Map<string, CheckResult> | undefined;
  const results = (): Map<string, CheckResult> => {
    if (byId === undefined) {
      const dir = mkdtempSync(join(tmpdir(), "nlc-py-"));
      const report = join(dir, "report.json");
      const p = cli([...backends().flatMap((b) => ["--backend", b]), "--filter", "C5/py-", "--profile", "quick", "--report", report], env);
      expect(p.exitCode).toBe(exitCode);
      byId = new Map((JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[]).map((c) => [c.id, c]));
      rmSync(dir, { recursive: true, force: true });
    }
    return byId;
  };
  const get = (backend: string, rule: string, kind: string): CheckResult => {
    const r = results().get(`C5/${parsePyBackend(backend).slug}/${rule}/${kind}`);
    if (r === undefined) throw new Error(`no result for ${backend} ${rule} ${kind}`);
    return r;
  };
  return { results, get };
}
