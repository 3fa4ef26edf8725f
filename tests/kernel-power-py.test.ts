/**
 * Detection power through the py: backend (docs/spec/precision.md#power): the correct naive delta
 * kernels (f32 and bf16) detect a 1% scale error in the gradients the planted variants of
 * examples/py-kernels/naive_delta_planted.py scale by 1%, their signatures show no blind spot, and
 * the planted variants fail.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import type { CheckPower } from "../oracle/kernel-power.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { ROOT } from "../paths.ts";
import { parsePyBackend } from "../conformance/kernel/python/plan.ts";

const torch = probeTorchSync();
const GOOD = "py:examples/py-kernels/naive_delta.py:naive_delta";
const BF16 = "py:examples/py-kernels/naive_delta_bf16.py:naive_delta_bf16";
const PLANTED = (k: string) => `py:examples/py-kernels/naive_delta_planted.py:${k}`;

describe.skipIf(!torch.available)("power of the py: example kernels", () => {
  const backends = [GOOD, BF16, PLANTED("dq_scaled"), PLANTED("dstate0_scaled"), PLANTED("bf16_dtheta_scaled")];
  let byId: Map<string, CheckResult> | undefined;
  const get = (backend: string, kind: string): CheckResult => {
    if (byId === undefined) {
      const dir = mkdtempSync(join(tmpdir(), "nlc-pypower-"));
      const report = join(dir, "report.json");
      Bun.spawnSync({
        cmd: [process.execPath, "conformance/cli.ts", ...backends.flatMap((b) => ["--backend", b]), "--filter", "C5/py-", "--filter", "delta", "--profile", "quick", "--report", report],
        cwd: ROOT, stdout: "pipe", stderr: "pipe",
      });
      byId = new Map((JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[]).map((c) => [c.id, c]));
      rmSync(dir, { recursive: true, force: true });
    }
    const r = byId.get(`C5/${parsePyBackend(backend).slug}/delta/${kind}`);
    if (r === undefined) throw new Error(`no result for ${backend} delta ${kind}`);
    return r;
  };

  test("the planted 1% scale errors fail, and the correct kernels' power in those tensors is at most 1% with no blind spot", () => {
    for (const k of ["dq_scaled", "dstate0_scaled", "bf16_dtheta_scaled"]) expect(`${k} ${get(PLANTED(k), "backward").status}`).toBe(`${k} fail`);
    const f32 = get(GOOD, "backward"), bf16 = get(BF16, "backward");
    for (const r of [f32, bf16]) {
      expect(`${r.id} ${r.status}`).toBe(`${r.id} pass`);
      expect(r.details!.blind_spots).toEqual([]);
    }
    const t = (r: CheckResult) => (r.details!.power as CheckPower).tensors;
    expect(t(f32).dq!.power!).toBeLessThanOrEqual(1e-3);
    expect(t(f32)["dM (initial state)"]!.power!).toBeLessThanOrEqual(1e-3);
    expect(t(bf16).dtheta!.power!).toBeLessThanOrEqual(1e-2);
  }, 600_000);
});
