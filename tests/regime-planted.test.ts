/**
 * Bugs that only show at scale are caught by the regime profile (docs/spec/conformance.md#regime):
 * the Delta example library run as a chunked kernel of 16-token chunks (tests/libs/planted-delta.cpp)
 * with one bug planted per build — the state handed to the next chunk scaled by 1 + 1/128, the second
 * 64-wide tile of the head dimension ignored, the gates read with a head stride of 8 when H > 8, the
 * last partial chunk dropped. Each fails C5's forward check under `--profile regime`, in the regime
 * that shows it; the unplanted build passes. The default profile's declared boundary case
 * (T = C + 1) catches the two chunk bugs; the tile and stride bugs need the regime profile's shapes.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { buildPlantedLibs } from "./planted-libs.ts";

const PLANTS = ["none", "handoff", "tile", "stride", "partial"] as const;
type Plant = (typeof PLANTS)[number];
const libOf = (p: Plant) => join(ROOT, "build", "test-libs", `libplanted_${p}.so`);
const idOf = (p: Plant) => `C5/lib-libplanted_${p}/delta/forward`;

let built = false;
function buildLibs(): void {
  if (built) return;
  built = true;
  buildPlantedLibs("planted-delta.cpp", PLANTS, "none", libOf);
}

/** The forward check of every planted build under one profile (one run, every library a backend). */
function forwardChecks(profile: "default" | "regime"): Map<string, CheckResult> {
  buildLibs();
  const dir = mkdtempSync(join(tmpdir(), "nlc-planted-"));
  try {
    const report = join(dir, "r.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...PLANTS.flatMap((x) => ["--backend", `lib:${libOf(x)}`]),
        "--filter", "delta/forward", "--profile", profile, "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(1);
    const checks = (JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks;
    return new Map(checks.map((c) => [c.id, c]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type Shapes = { T: [number, number]; d: [number, number]; H: [number, number]; B: [number, number]; chunk_boundaries_crossed: number };
const shapesOf = (c: CheckResult) => (c.details as { shapes: Shapes }).shapes;

test("regime profile: every planted bug fails in the regime that shows it; the unplanted build passes", () => {
  const by = forwardChecks("regime");
  const status = (p: Plant) => `${p}: ${by.get(idOf(p))!.status}`;
  expect(status("none")).toBe("none: pass");
  const control = shapesOf(by.get(idOf("none"))!);
  expect(control.T[1]).toBeGreaterThanOrEqual(1000);
  // a wide key size (48, 60, 64, 96, 100, 128 or 256: cases/kernel-regimes.ts WIDE_D)
  expect(control.d[1]).toBeGreaterThanOrEqual(48);
  expect(control.H[1]).toBeGreaterThan(8);
  expect(control.chunk_boundaries_crossed).toBeGreaterThan(0);
  for (const p of ["handoff", "tile", "stride", "partial"] as const) expect(status(p)).toBe(`${p}: fail`);
  // the shrunk case names its regime and shape
  const msg = (p: Plant) => by.get(idOf(p))!.message!;
  expect(msg("tile")).toMatch(/^regime wide \(B=1 T=\d+ H=1 d=(96|100|128|256) C=16\)/);
  expect(msg("stride")).toMatch(/^regime heads \(B=\d+ T=17 H=(9|12|16) d=\d+ C=16\)/);
  for (const p of ["handoff", "partial"] as const) expect(msg(p)).toMatch(/^regime \w+ \(B=\d+ T=(17|33|\d{4}) /);
}, 300_000);

test("default profile: the boundary case (T = C + 1) catches the chunk bugs; tile and stride need the regime profile", () => {
  const by = forwardChecks("default");
  for (const p of ["none", "tile", "stride"] as const) expect(`${p}: ${by.get(idOf(p))!.status}`).toBe(`${p}: pass`);
  for (const p of ["handoff", "partial"] as const) {
    const c = by.get(idOf(p))!;
    expect(`${p}: ${c.status}`).toBe(`${p}: fail`);
    // the declared case runs first: T = 17 at the declared chunk of 16
    expect(shapesOf(c).T).toEqual([17, 17]);
    expect(c.path).toBe("0");
  }
}, 300_000);
