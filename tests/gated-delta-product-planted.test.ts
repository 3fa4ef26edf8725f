/**
 * Gated DeltaProduct's registered checks are able to fail on issue 34's planted bug, one Householder
 * step dropped (docs/spec/titans-family.md#gated-delta-product-tests):
 *  - C8: the declaration's invariant "Gated Delta at n_h = 1" fails the reference pair with the last
 *    step of every token dropped, on every seed, and passes the clean pair;
 *  - C9: in a temporary copy of the repository the PyTorch forward is planted to run n_h − 1 steps per
 *    token, and the cross-check of `gated_delta_product` fails on y while `delta` still passes (the
 *    unplanted copy passes); skipped without python3 + torch;
 *  - C5: cuda/gated_delta_product.cu built for the CPU emulation with its forward planted the same way
 *    (the last step of each token skipped) fails C5's forward check as a `lib:` backend, and the same
 *    source unplanted, built the same way, passes it.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { ROOT } from "../paths.ts";
import { equalsGatedDeltaAtOneStep, gated_delta_product, gatedDeltaProductInner, householderSteps } from "../src/rules/gated_delta_product.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerPair, RuleConfig } from "../src/rules/types.ts";
import { expectC9FailsPlant } from "./c9-plant.ts";

const torch = probeTorchSync();

/** θ with the last step of every token set to 0: that step is the identity, i.e. dropped. */
function lastStepDropped(theta: Tensor, cfg: RuleConfig): Tensor {
  const nh = householderSteps(cfg), out = new Tensor(theta.dtype, theta.shape, theta.data.slice());
  for (let t = 0; t < cfg.seq_len; t++) out.data[t * nh + nh - 1] = 0;
  return out;
}

const dropped: InnerPair<string> = {
  saved: gatedDeltaProductInner.saved,
  forward: (inp, st, cfg) => gatedDeltaProductInner.forward({ ...inp, theta: lastStepDropped(inp.theta!, cfg) }, st, cfg),
  backward: (sv, inp, dy, cfg, dF) => gatedDeltaProductInner.backward(sv, { ...inp, theta: lastStepDropped(inp.theta!, cfg) }, dy, cfg, dF),
};

/** The forward's step loop of the kernel and the same loop one step short. */
const KERNEL_LOOP = "    for (int s = 0; s < nh; s++) {\n      const float* k = sm.k + static_cast<size_t>(s) * d;";
const KERNEL_PLANT = "    for (int s = 0; s < nh - 1; s++) {\n      const float* k = sm.k + static_cast<size_t>(s) * d;";

/** A CPU-emulation library of abi.cu, the runtime and cuda/gated_delta_product.cu with `from` replaced by `to`. */
function buildLib(dir: string, name: string, from: string, to: string): string {
  const src = readFileSync(join(ROOT, "cuda", "gated_delta_product.cu"), "utf8");
  const planted = src.replace(from, to);
  if (from !== to) expect(planted).not.toBe(src);
  const cu = join(dir, `${name}.cu`);
  writeFileSync(cu, planted);
  const flags = ["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread", `-I${join(ROOT, "cuda")}`];
  const out = join(dir, `${name}.so`);
  const cc = Bun.spawnSync({
    cmd: ["g++", ...flags, "-shared", "-o", out, "-x", "c++", join(ROOT, "cuda", "abi.cu"), cu, "-x", "none", join(ROOT, "cuda", "emu_runtime.cpp")],
    stdout: "pipe", stderr: "pipe",
  });
  if (cc.exitCode !== 0) throw new Error(`building ${out} failed: ${cc.stderr.toString().slice(-2000)}`);
  return out;
}

describe("Gated DeltaProduct: one Householder step dropped", () => {
  test("C8: 'Gated Delta at n_h = 1' fails the dropped step on every seed and passes the clean pair", () => {
    expect(gated_delta_product.invariants!.map((i) => i.name)).toContain("Gated Delta at n_h = 1");
    for (const dtype of ["f64", "f32"] as const) {
      for (let seed = 1; seed <= 20; seed++) {
        expect({ seed, clean: equalsGatedDeltaAtOneStep(gatedDeltaProductInner, dtype, seed) }).toEqual({ seed, clean: null });
        expect({ seed, planted: typeof equalsGatedDeltaAtOneStep(dropped, dtype, seed) }).toEqual({ seed, planted: "string" });
      }
    }
  });

  test.skipIf(!torch.available)("C9 fails the planted PyTorch forward, and passes the clean one", () => {
    expectC9FailsPlant("gated_delta_product",
      "        for j in range(nh):\n            r, beta = t * nh + j, g[\"theta\"][t * nh + j]",
      "        for j in range(nh - 1):\n            r, beta = t * nh + j, g[\"theta\"][t * nh + j]");
  }, 300_000);

  test("C5: the cpu-emu kernel with its forward one step short fails the forward check; unplanted it passes", () => {
    const dir = mkdtempSync(join(tmpdir(), "nlc-dprod-plant-"));
    try {
      mkdirSync(dir, { recursive: true });
      const clean = buildLib(dir, "libdprod_clean", KERNEL_LOOP, KERNEL_LOOP);
      const plant = buildLib(dir, "libdprod_dropped", KERNEL_LOOP, KERNEL_PLANT);
      const report = join(dir, "r.json");
      const p = Bun.spawnSync({
        cmd: [process.execPath, "conformance/cli.ts", "--backend", `lib:${clean}`, "--backend", `lib:${plant}`,
          "--filter", "gated_delta_product/forward", "--profile", "quick", "--report", report],
        cwd: ROOT, stdout: "pipe", stderr: "pipe",
      });
      expect(p.exitCode).toBe(1);
      const checks = (JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[] }).checks;
      const status = (lib: string) => `${lib}: ${checks.find((c) => c.id === `C5/lib-${lib}/gated_delta_product/forward`)?.status}`;
      expect(status("libdprod_clean")).toBe("libdprod_clean: pass");
      expect(status("libdprod_dropped")).toBe("libdprod_dropped: fail");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
