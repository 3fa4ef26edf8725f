/**
 * Our pairs in their other precisions pass C5 (docs/spec/precision.md#declaration): the pure-f32
 * build (f32 storage, f32 sums) and the bf16-storage build (bf16 / f32 / f32), judged on cpu-emu
 * against the plain reference of their declared precision. The default run judges the f32 / f64
 * build only; these two run here, at the quick profile, so that a change to the harness's wire
 * conversion, the case rounding or the yardstick that breaks a reduced-precision kernel fails CI.
 * Deeper measurements of these builds are in docs/spec/precision.md#orders (the default run leaves them out for time).
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

function c5(backend: string): { code: number | null; out: string; report: { checks: { id: string; status: string; details?: { precision?: unknown } }[] } } {
  const report = join(mkdtempSync(join(tmpdir(), "nlc-prec-")), "r.json");
  const r = Bun.spawnSync({
    cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--backend", backend, "--filter", `C5/${backend}/`, "--profile", "quick", "--report", report],
    cwd: ROOT,
  });
  const out = r.stdout.toString() + r.stderr.toString();
  return { code: r.exitCode, out, report: JSON.parse(readFileSync(report, "utf8")) };
}

for (const [backend, precision] of [
  ["cpu-f32", { storage: "f32", state: "f32", accumulate: "f32" }],
  ["cpu-bf16", { storage: "bf16", state: "f32", accumulate: "f32" }],
] as const) {
  test(`C5 passes the ${backend} build, judged at ${precision.storage} / ${precision.state} / ${precision.accumulate}`, () => {
    const r = c5(backend);
    expect(r.out).toContain(" 0 failed");
    expect(r.code).toBe(0);
    const judged = r.report.checks.filter((c) => c.status === "pass");
    // every rule's forward and backward, at least, were judged (not skipped)
    expect(judged.length).toBeGreaterThanOrEqual(40);
    const fb = judged.find((c) => c.id === `C5/${backend}/delta/backward`);
    expect(fb?.details?.precision).toEqual(precision);
  }, 600_000);
}
