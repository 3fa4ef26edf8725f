/**
 * DPLR's low-rank read taken from the decayed state (u_t = M_t diag(w_t) a_t instead of M_t a_t;
 * issue 34's planted bug) passes DPLR's C8 invariants (write-read from M_0 = 0, IPLR at α = 0,
 * the column decay with a = 0: each has u unaffected by the decay), so C9 is what catches it
 * (docs/spec/titans-family.md#dplr-tests): in a temporary copy of the repository the PyTorch
 * forward is planted so, and the C9 cross-check of `dplr` fails while `delta` still passes; the
 * unplanted copy passes. Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { decayActsOnItsColumn, dplr, iplrInner, iplrIsDplrWithoutDecay, writeRead } from "../src/rules/dplr.ts";
import * as K from "../src/numeric.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerPair } from "../src/rules/types.ts";

const torch = probeTorchSync();

/** The reference pair planted the same way: a_t replaced by diag(w_t) a_t in the read (forward only: the invariants read y and states). */
const decayedRead: InnerPair<string> = {
  saved: dplr.inner.saved,
  forward: (inp, state, cfg) => {
    const a = new Tensor(inp.a!.dtype, inp.a!.shape, inp.a!.data.map((x, i) => x * (1 - inp.alpha!.data[i]!)));
    return dplr.inner.forward({ ...inp, a }, state, cfg);
  },
  backward: (saved, inp, dy, cfg, dFinal) => dplr.inner.backward(saved, inp, dy, cfg, dFinal),
};

describe("DPLR: the low-rank read taken from the decayed state", () => {
  test("the planted pair differs from the clean one, and DPLR's invariants cannot see it", () => {
    for (const dtype of ["f64", "f32"] as const) {
      for (let seed = 1; seed <= 5; seed++) {
        expect({ seed, clean: [writeRead(dplr.inner, dtype, seed), iplrIsDplrWithoutDecay(dplr.inner, iplrInner, dtype, seed), decayActsOnItsColumn(dplr.inner, dtype, seed)] })
          .toEqual({ seed, clean: [null, null, null] });
        expect({ seed, planted: [writeRead(decayedRead, dtype, seed), iplrIsDplrWithoutDecay(decayedRead, iplrInner, dtype, seed), decayActsOnItsColumn(decayedRead, dtype, seed)] })
          .toEqual({ seed, planted: [null, null, null] });
      }
    }
    const d = 3, s = 2, cfg = { d, seq_len: s };
    const t = (vals: number[], shape: number[]) => new Tensor("f64", shape, Float64Array.from(vals));
    const inp = {
      k: t([1, 0, 0, 0, 1, 0], [s, d]), v: t([0.5, -0.2, 0.1, 0.3, 0.4, -0.6], [s, d]), q: t([0, 0, 1, 0.6, 0.8, 0], [s, d]),
      a: t([0.6, 0.8, 0, 0, 0.6, 0.8], [s, d]), b: t([0, 0, 1, 1, 0, 0], [s, d]), alpha: t([0.2, 0.5, 0.7, 0.1, 0.4, 0.9], [s, d]),
    };
    const M0 = t([0.3, -0.1, 0.2, 0.05, 0.4, -0.3, 0.1, 0.2, 0.25], [d, d]);
    const x = { ...inp, x: inp.k };
    const clean = dplr.inner.forward(x, { M: M0 }, cfg).y, bad = decayedRead.forward(x, { M: M0 }, cfg).y;
    let diff = 0;
    for (let i = 0; i < clean.size; i++) diff = Math.max(diff, Math.abs(clean.data[i]! - bad.data[i]!));
    expect(diff).toBeGreaterThan(1e-3);
    expect(K.dot(inp.a.data, inp.a.data, d)).toBeCloseTo(1, 12);
  });

  test.skipIf(!torch.available)("C9 fails the planted PyTorch forward, and passes the clean one", () => {
    const dir = copyTree();
    try {
      const cross = ["conformance/c9/cross-check.ts", "--rule", "dplr,delta", "--cases", "2", "--no-model", "--no-fixtures"];
      const clean = run(dir, cross);
      expect({ code: clean.code, out: clean.code === 0 ? "" : clean.out.slice(-2000) }).toEqual({ code: 0, out: "" });
      const path = join(dir, "python/nlc_torch/rules.py");
      const src = readFileSync(path, "utf8");
      const planted = src.replace("torch.outer(b[t], a[t] @ S)", "torch.outer(b[t], a[t] @ ((1 - g[\"alpha\"][t]).unsqueeze(1) * S))");
      expect(planted).not.toBe(src);
      writeFileSync(path, planted);
      const r = run(dir, cross);
      expect(r.code).toBe(1);
      expect(r.out).toMatch(/^dplr\s.*FAIL: y/m);
      expect(r.out).not.toMatch(/^delta\s.*(FAIL|ERROR)/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

/** A temporary copy of the working tree (tracked and untracked, not ignored files), node_modules linked. */
function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), "nlc-dplr-plant-"));
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
