/**
 * The closing line CI reads: the "conformance: N passed, M failed" prefix (M counting fail,
 * vacuous and error) followed by the breakdown, from a run's summary or from `--summary PATH`.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closingLine } from "../harness/report.ts";
import { ROOT } from "../paths.ts";
import { check, report } from "./synthetic-report.ts";

/** What a CI log reader extracts from the line: the prefix it always parsed. */
const CI_PREFIX = /^conformance: (\d+) passed, (\d+) failed/;

test("closing line: prefix CI parses, then fail, vacuous, error and skipped counts", () => {
  const line = closingLine({ pass: 55, fail: 2, vacuous: 0, error: 11, skip: 48 });
  expect(line).toBe("conformance: 55 passed, 13 failed (2 fail, 0 vacuous, 11 error, 48 skipped)");
  const m = CI_PREFIX.exec(line)!;
  expect([m[1], m[2]]).toEqual(["55", "13"]);
  expect(closingLine({ pass: 3, fail: 0, vacuous: 0, error: 0, skip: 0 })).toBe("conformance: 3 passed, 0 failed (0 fail, 0 vacuous, 0 error, 0 skipped)");
});

function summary(path: string) {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--summary", path], cwd: ROOT });
  return { code: r.exitCode, out: r.stdout.toString().trim(), err: r.stderr.toString() };
}

test("--summary prints the closing line of a report and exits 1 when anything failed", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-summary-"));
  const bad = join(dir, "bad.json");
  writeFileSync(bad, JSON.stringify(report([check("C2/a", "pass"), check("C2/b", "fail"), check("C2/c", "vacuous"), check("C2/d", "error"), check("C5/e", "skip")])));
  expect(summary(bad)).toMatchObject({ code: 1, out: "conformance: 1 passed, 3 failed (1 fail, 1 vacuous, 1 error, 1 skipped)" });
  const good = join(dir, "good.json");
  writeFileSync(good, JSON.stringify(report([check("C2/a", "pass"), check("C5/e", "skip")])));
  expect(summary(good)).toMatchObject({ code: 0, out: "conformance: 1 passed, 0 failed (0 fail, 0 vacuous, 0 error, 1 skipped)" });
  const missing = summary(join(dir, "absent.json"));
  expect(missing.code).toBe(2);
  expect(missing.err).toContain("absent.json");
  expect(CI_PREFIX.test(missing.out)).toBe(true);
}, 120_000);
