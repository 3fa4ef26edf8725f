/**
 * A bug that shows only after many tokens is caught in the regime profile's `long` batch, which
 * Comba and DPLR are judged in since they draw contractive inputs there (RuleDecl.longInputs,
 * docs/spec/conformance.md#long-inputs): tests/py-kernels/long_drift_planted.py's Comba kernel with
 * its state scaled by 1 + 1/64 at token 512 fails C5's forward check under `--profile regime`, in the
 * long regime at token 512, while the clean kernel passes; under the default profile (T <= 20) the
 * planted kernel passes. When Comba declared `longRegime` (not judged in long), the planted kernel
 * passed `--profile regime` too. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const FILE = "tests/py-kernels/long_drift_planted.py";
const hasTorch = probeTorchSync().available;
const id = (k: string) => `C5/py-long-${k}/comba/forward`;

function forwardChecks(profile: "default" | "regime", kernels: readonly string[]): Map<string, CheckResult> {
  const dir = mkdtempSync(join(tmpdir(), "nlc-long-planted-"));
  try {
    const report = join(dir, "r.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", ...kernels.flatMap((k) => ["--backend", `py:${FILE}:${k}@long-${k}`]), "--filter", "comba/forward",
        "--profile", profile, "--seed", "1", "--report", report],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect([0, 1]).toContain(p.exitCode);
    return new Map((JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks.map((c) => [c.id, c]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test.skipIf(!hasTorch)("py: a state drift after token 512 fails Comba's long regime; the clean kernel passes it", () => {
  const by = forwardChecks("regime", ["clean", "drift"]);
  const clean = by.get(id("clean"))!, drift = by.get(id("drift"))!;
  expect(`clean: ${clean.status}`).toBe("clean: pass");
  // judged in long: no regime left out, a sequence of a thousand tokens and more
  expect((clean.details as { regimes_not_judged?: unknown }).regimes_not_judged).toBeUndefined();
  expect((clean.details as { shapes: { T: number[] } }).shapes.T[1]).toBeGreaterThanOrEqual(1000);
  expect(`drift: ${drift.status}`).toBe("drift: fail");
  expect(drift.message).toMatch(/^regime long \(B=1 T=\d{4} H=1 d=\d C=\d+\): y \(sequence 0\): .* at \(b=0, t=512,/);
}, 600_000);

test.skipIf(!hasTorch)("py: the default profile's sequences never reach token 512: the drift passes there", () => {
  const drift = forwardChecks("default", ["drift"]).get(id("drift"))!;
  expect(`drift: ${drift.status}`).toBe("drift: pass");
  expect((drift.details as { shapes: { T: number[] } }).shapes.T[1]).toBeLessThan(512);
}, 300_000);
