/**
 * The py: side of the planted scale bugs (tests/py-kernels/chunked_planted.py, a chunked delta
 * kernel declaring `nlc.chunk_size = 16`; docs/spec/conformance.md#regime): under the default
 * profile the declared boundary case (T = C + 1 = 17) runs first and fails the state hand-off and
 * partial-chunk bugs, while the unplanted kernel passes. The tile and head-stride bugs need the
 * regime profile's shapes: under `--profile regime` every planted kernel fails, in the regime that
 * shows it. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const KERNELS = ["chunked", "handoff", "tile", "stride", "partial"] as const;
const FILE = "tests/py-kernels/chunked_planted.py";
const hasTorch = probeTorchSync().available;
/**
 * The checks keep the ids (and so the per-check seeds, harness/run.ts) this test was written
 * under. A seed whose 3 regime cases all draw d <= 64 does not catch the tile bug: the wide
 * regime draws d > 64 four times in five (cases/kernel-regimes.ts), so (1/5)^3 = 0.8 % of seeds.
 */
const NAME = (k: string) => `chunked_planted-${k}`;

function forwardChecks(profile: "default" | "regime"): Map<string, CheckResult> {
  const dir = mkdtempSync(join(tmpdir(), "nlc-py-planted-"));
  try {
    const report = join(dir, "r.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...KERNELS.flatMap((k) => ["--backend", `py:${FILE}:${k}@${NAME(k)}`]), "--filter", "delta/forward",
        "--profile", profile, "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(1);
    return new Map((JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks.map((c) => [c.id, c]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test.skipIf(!hasTorch)("py: regime profile: every planted bug fails in the regime that shows it; the chunked kernel passes", () => {
  const by = forwardChecks("regime");
  const check = (k: string) => by.get(`C5/py-${NAME(k)}/delta/forward`)!;
  expect(`chunked: ${check("chunked").status}`).toBe("chunked: pass");
  const shapes = (check("chunked").details as { shapes: { T: number[]; d: number[]; H: number[] } }).shapes;
  expect(shapes.T[1]).toBeGreaterThanOrEqual(1000);
  expect(shapes.d[1]).toBeGreaterThan(64);
  expect(shapes.H[1]).toBeGreaterThan(8);
  for (const k of ["handoff", "tile", "stride", "partial"]) expect(`${k}: ${check(k).status}`).toBe(`${k}: fail`);
  expect(check("tile").message).toMatch(/^regime wide \(B=1 T=\d+ H=1 d=(96|100|128|256) C=16\)/);
  expect(check("stride").message).toMatch(/^regime heads \(B=\d+ T=17 H=(9|12|16) d=\d+ C=16\)/);
}, 300_000);

test.skipIf(!hasTorch)("py: the default boundary case catches the chunk hand-off and partial-chunk bugs; the chunked kernel passes", () => {
  const by = forwardChecks("default");
  const check = (k: string) => by.get(`C5/py-${NAME(k)}/delta/forward`)!;
  for (const k of ["chunked", "tile", "stride"]) expect(`${k}: ${check(k).status}`).toBe(`${k}: pass`);
  for (const k of ["handoff", "partial"]) {
    expect(`${k}: ${check(k).status}`).toBe(`${k}: fail`);
    expect(check(k).path).toBe("0");
    expect((check(k).details as { shapes: { T: number[] } }).shapes.T).toEqual([17, 17]);
  }
  const shapes = (check("chunked").details as { shapes: { T: number[]; chunk_boundaries_crossed: number } }).shapes;
  expect(shapes.T[1]).toBeGreaterThanOrEqual(17);
  expect(shapes.chunk_boundaries_crossed).toBeGreaterThan(0);
}, 300_000);
