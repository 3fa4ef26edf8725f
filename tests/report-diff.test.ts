/** `diff OLD NEW` on small synthetic reports: every category, drift, exit codes, usage errors. */
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { diffReports, errorToBound, isRegression } from "../harness/report-diff.ts";
import { ROOT } from "../paths.ts";
import { check, report } from "./synthetic-report.ts";

const OLD = report([
  check("C2/stays", "pass", { ratio: 0.01 }),
  check("C2/drifts", "pass", { ratio: 0.001 }),
  check("C2/breaks", "pass", { ratio: 0.1 }),
  check("C2/heals", "fail", { ratio: 3000 }),
  check("C2/gone", "pass"),
  check("C5/still", "error"),
]);
const NEW = report([
  check("C2/stays", "pass", { ratio: 0.05 }),
  check("C2/drifts", "pass", { ratio: 0.5 }),
  check("C2/breaks", "fail", { ratio: 3000 }),
  check("C2/heals", "pass", { ratio: 0.2 }),
  check("C5/still", "error"),
  check("C9/new", "vacuous"),
  check("C9/newpass", "pass"),
]);

test("diff: new failures, fixed, still failing, disappeared, appeared and drift over 10x", () => {
  const d = diffReports(OLD, NEW);
  expect(d.newFailures.map((r) => [r.id, r.was, r.now])).toEqual([["C2/breaks", "pass", "fail"], ["C9/new", null, "vacuous"]]);
  expect(d.fixed).toEqual([{ id: "C2/heals", was: "fail" }]);
  expect(d.stillFailing).toEqual([{ id: "C5/still", now: "error" }]);
  expect(d.disappeared).toEqual([{ id: "C2/gone", was: "pass" }]);
  expect(d.appeared.map((r) => r.id)).toEqual(["C9/new", "C9/newpass"]);
  // 0.01 -> 0.05 is x5 (not flagged); 0.001 -> 0.5 is x500.
  expect(d.drift.map((r) => r.id)).toEqual(["C2/drifts"]);
  expect(d.drift[0]!.growth).toBeCloseTo(500, 6);
  expect(d.driftCompared).toBe(2);
  expect(isRegression(d)).toBe(true);
  expect(isRegression(diffReports(OLD, OLD))).toBe(false);
});

test("error-to-bound: atol + rtol·|ref|, the max form, a fixture's f64 record, a relative bound", () => {
  const w = { abs: 2e-8, rel: 1e-8, tensor: "y", index: 0 }; // |ref| = 2
  expect(errorToBound(check("C2/a", "pass", { worst: w, tolerance: { rtol: 1e-5, atol: 1e-8 } }))!).toBeCloseTo(2e-8 / (1e-8 + 2e-5), 12);
  expect(errorToBound(check("C3/a", "pass", { worst: w, tolerance: { rtol: 1e-12, atol: 1e-12, form: "max" } }))!).toBeCloseTo(2e-8 / 2e-12, 3);
  expect(errorToBound(check("C6/a", "pass", { worst: w, tolerance: { kind: "fixture", f64: { rtol: 0, atol: 1e-7 } } }))!).toBeCloseTo(0.2, 12);
  expect(errorToBound(check("C9/a", "pass", { worst: w, tolerance: { rel: 1e-10 } }))!).toBeCloseTo(100, 9);
  expect(errorToBound(check("C4/a", "pass", { worst: w, tolerance: { kind: "bitwise" } }))).toBeNull();
});

function cli(...args: string[]) {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: ROOT });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

test("diff CLI: exit 1 on a regression, 0 without, 2 naming a missing or invalid file", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-diff-"));
  const [a, b, bad] = ["old.json", "new.json", "bad.json"].map((f) => join(dir, f)) as [string, string, string];
  writeFileSync(a, JSON.stringify(OLD));
  writeFileSync(b, JSON.stringify(NEW));
  writeFileSync(bad, JSON.stringify({ format: "nlc-report/1", checks: "no" }));
  const reg = cli("diff", a, b);
  expect(reg.code).toBe(1);
  expect(reg.out).toContain("new failures: 2");
  expect(reg.out).toContain("C2/drifts: error/bound");
  expect(reg.out).toContain("report diff: regression");
  const same = cli("diff", a, a);
  expect(same.code).toBe(0);
  expect(same.out).toContain("report diff: no regression");
  const missing = cli("diff", a, join(dir, "absent.json"));
  expect(missing.code).toBe(2);
  expect(missing.err).toContain("absent.json");
  const invalid = cli("diff", bad, b);
  expect(invalid.code).toBe(2);
  expect(invalid.err).toContain("bad.json");
  expect(cli("diff", a).code).toBe(2);
}, 120_000);
