/**
 * Comba's correction read with k instead of p (issue 34's planted bug) passes the C8 invariant
 * "Delta at p = k" by construction, so C9 is what catches it (docs/spec/titans-family.md#comba-tests):
 * in a temporary copy of the repository the PyTorch forward is planted to read the state with k,
 * and the C9 cross-check of `comba` fails while that of `delta` still passes; the unplanted copy
 * passes. Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { comba, equalsDeltaAtPEqualK } from "../src/rules/comba.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerPair } from "../src/rules/types.ts";

const torch = probeTorchSync();

/** The reference pair planted the same way: the correction reads M_t with k (its exact gradient: p's part joins dk, dp = 0). */
const readsK: InnerPair<string> = {
  saved: comba.inner.saved,
  forward: (inp, state, cfg) => comba.inner.forward({ ...inp, p: inp.k }, state, cfg),
  backward: (saved, inp, dy, cfg, dFinal) => {
    const g = comba.inner.backward(saved, { ...inp, p: inp.k }, dy, cfg, dFinal);
    const dk = new Tensor(g.dk!.dtype, g.dk!.shape, g.dk!.data.map((x, i) => x + g.dp!.data[i]!));
    return { ...g, dk, dp: new Tensor(g.dp!.dtype, g.dp!.shape) };
  },
};

describe("Comba: the correction read with k instead of p", () => {
  test("the Delta-at-p = k invariant cannot see it (it sets p = k)", () => {
    for (let seed = 1; seed <= 5; seed++) {
      expect({ seed, clean: equalsDeltaAtPEqualK(comba.inner, "f64", seed) }).toEqual({ seed, clean: null });
      expect({ seed, planted: equalsDeltaAtPEqualK(readsK, "f64", seed) }).toEqual({ seed, planted: null });
    }
  });

  test.skipIf(!torch.available)("C9 fails the planted PyTorch forward, and passes the clean one", () => {
    const dir = copyTree();
    try {
      const cross = ["conformance/c9/cross-check.ts", "--rule", "comba,delta", "--cases", "2", "--no-model", "--no-fixtures"];
      const clean = run(dir, cross);
      expect({ code: clean.code, out: clean.code === 0 ? "" : clean.out.slice(-2000) }).toEqual({ code: 0, out: "" });
      const path = join(dir, "python/nlc_torch/rules.py");
      const src = readFileSync(path, "utf8");
      const planted = src.replace('u = g["theta"][t] * (v[t] - S.t() @ p[t])', 'u = g["theta"][t] * (v[t] - S.t() @ k[t])');
      expect(planted).not.toBe(src);
      writeFileSync(path, planted);
      const r = run(dir, cross);
      expect(r.code).toBe(1);
      expect(r.out).toMatch(/^comba\s.*FAIL: y/m);
      expect(r.out).not.toMatch(/^delta\s.*(FAIL|ERROR)/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

/** A temporary copy of the working tree (tracked and untracked, not ignored files), node_modules linked. */
function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), "nlc-comba-plant-"));
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd: ROOT, stdout: "pipe" });
  for (const f of ls.stdout.toString().split("\0").filter((f) => f !== "")) {
    if (!existsSync(join(ROOT, f))) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(dir, f));
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

function run(dir: string, args: string[]): { code: number; out: string } {
  const p = Bun.spawnSync({ cmd: [process.execPath, ...args], cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_SERIAL: "1" } });
  return { code: p.exitCode ?? -1, out: p.stdout.toString() + p.stderr.toString() };
}
