/**
 * The declared saturated case of native kernels (docs/spec/conformance.md#regime, cases/edge-gates.ts):
 * the chunked Delta library of tests/libs/planted-delta.cpp built with -DPLANT_SATURATED takes the
 * decay of its last partial chunk from cumulative logs, exp(L_t) · exp(−L_{t−1}): right for every
 * alpha < 1, 0 · inf = NaN after two tokens of alpha = 1. The generated cases and the other declared
 * ones pass it; the saturated case (T = C + 3) fails it forward, by name. The unplanted build passes.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { buildPlantedLibs } from "./planted-libs.ts";

const PLANTS = ["none", "saturated"] as const;
const libOf = (p: string) => join(ROOT, "build", "test-libs", `libedges_${p}.so`);

test("a native kernel that computes 0 · inf at a partial last chunk under saturated gates fails the saturated case; the control passes", () => {
  buildPlantedLibs("planted-delta.cpp", PLANTS, "none", libOf);
  const dir = mkdtempSync(join(tmpdir(), "nlc-edges-"));
  try {
    const report = join(dir, "r.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...PLANTS.flatMap((x) => ["--backend", `lib:${libOf(x)}`]), "--filter", "delta/forward", "--profile", "quick", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(1);
    const by = new Map((JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks.map((c) => [c.id, c]));
    const none = by.get("C5/lib-libedges_none/delta/forward")!, bad = by.get("C5/lib-libedges_saturated/delta/forward")!;
    expect(`${none.status}: ${none.message}`).toStartWith("pass");
    expect(bad.status).toBe("fail");
    expect(bad.message).toContain("case saturated gates (sequence n: alpha -> 1 for even n");
    expect(bad.message).toContain("NaN");
    // every other case passed: the failing one is the last declared case, after the generated ones
    expect((bad.details as { shapes: { T: number[] } }).shapes.T[1]).toBe(19);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);
