/**
 * What C9 judges (docs/spec/conformance.md#c9): a run cross-checks the C9 checks it selected and
 * no others (`--select`, each case the one a whole run draws); the edge cases at the guards of the
 * math are cases of their rule variant's check; and the golden fixtures replayed through torch are
 * the check `C9/fixtures`, which fails on a fixture whose expected values torch does not reproduce.
 * Skipped without python3 + torch.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const dir = mkdtempSync(join(tmpdir(), "nlc-c9-scope-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function crossCheck(name: string, args: string[]) {
  const json = join(dir, `${name}.json`);
  const p = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "c9", "cross-check.ts"), ...args, "--json", json], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), report: JSON.parse(readFileSync(json, "utf8")) };
}

function select(name: string, s: { rules: string[]; model: string[]; fixtures: boolean }): string {
  const path = join(dir, `${name}.select.json`);
  writeFileSync(path, JSON.stringify(s));
  return path;
}

describe.skipIf(!probeTorchSync().available)("what C9 cross-checks", () => {
  test("--select runs the variants and cases it names, each as a whole run draws it; edge cases count in their variant", () => {
    const whole = crossCheck("whole", ["--rule", "memora", "--no-model", "--no-fixtures"]);
    const one = crossCheck("one", ["--select", select("one", { rules: ["memora"], model: ["delta k2 frozen-1"], fixtures: false })]);
    expect(one.code).toBe(0);
    expect(Object.keys(one.report.rules)).toEqual(["memora"]);
    expect(one.report.model.map((m: { id: string }) => m.id)).toEqual(["delta k2 frozen-1"]);
    expect(one.report.fixtures).toBeUndefined();
    expect(one.report.rules.memora).toEqual({ ...whole.report.rules.memora, medianMs: one.report.rules.memora.medianMs, medianRoundTripMs: one.report.rules.memora.medianRoundTripMs });
    // 6 generated, 2 at the fixtures' shape, 2 pinned, and the 4 edge cases MEMORA has
    expect(one.report.rules.memora.cases).toBe(14);
    expect(one.report.rules.memora.grads.name).toContain("(edge: ");
  }, 120_000);

  test("C9/fixtures: a golden fixture whose expected y torch does not reproduce fails, naming the file", () => {
    copyFileSync(join(ROOT, "fixtures", "golden", "rule-delta.json"), join(dir, "rule-delta.json"));
    const ok = crossCheck("golden-ok", ["--no-rules", "--no-model", "--golden", dir]);
    expect(ok.code).toBe(0);
    expect(ok.report.fixtures).toMatchObject({ replayed: 1, failed: [] });
    const doc = JSON.parse(readFileSync(join(dir, "rule-delta.json"), "utf8"));
    doc.expected.y.data[5] *= 1 + 1e-6; // a fixture written by a slightly wrong forward
    writeFileSync(join(dir, "rule-delta.json"), JSON.stringify(doc));
    const bad = crossCheck("golden-bad", ["--no-rules", "--no-model", "--golden", dir]);
    expect(bad.code).toBe(1);
    expect(bad.report.fixtures.failed).toHaveLength(1);
    expect(bad.report.fixtures.failed[0]).toMatch(/^rule-delta\.json: y /);
  }, 120_000);

  test("a run of one C9 check reports that check and C9/fixtures is a check of its own", () => {
    const report = join(dir, "cli.json");
    const p = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--filter", "C9/fixtures,C9/swa", "--report", report], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const checks = JSON.parse(readFileSync(report, "utf8")).checks as { id: string; status: string; runs: number }[];
    expect(checks.map((c) => [c.id, c.status])).toEqual([["C9/swa", "pass"], ["C9/fixtures", "pass"]]);
    expect(checks[1]!.runs).toBeGreaterThan(100);
  }, 120_000);
});
