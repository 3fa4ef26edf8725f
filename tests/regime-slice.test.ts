/**
 * CI's slice of the regime profile (docs/spec/conformance.md#regime): one rule at one production
 * shape — Delta on the cpu-emu build, T = C + 1 at the default chunk size C = 16, d = 64, H = 4
 * heads × B = 8 (B·H = 32 sequences, each with its own gates and state), checkpoint interval C —
 * through C5's forward and backward cases; and one case with more than 8 heads — H = 9 × B = 4,
 * d = 8 — where a kernel that takes the head index modulo 8 for its gates (the chunked Delta
 * library of tests/libs/planted-delta.cpp built with -DPLANT_MOD8) fails and the correct one
 * passes: without it CI would see H ≤ 4 only. The whole profile runs with `--profile regime`.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { AbiCaseSpec } from "../cases/kernel-batch.ts";
import { backwardCase, forwardCase } from "../conformance/kernel/native/phase-case.ts";
import { DEFAULT_KERNEL_CHUNKS } from "../cases/kernel-batch.ts";
import { ruleByKey } from "../src/rules/index.ts";

const delta = ruleByKey("delta");
const C = Math.min(...DEFAULT_KERNEL_CHUNKS);
const ALPHA = ["mid", "low", "high"] as const, THETA = ["small", "large"] as const, STATE = ["init", "random"] as const;
// 31 more sequences, each with its own seed, gate levels and initial state
const extra = Array.from({ length: 31 }, (_, j) => ({ seed: 500 + 7 * j, alpha: ALPHA[j % 3]!, theta: THETA[(j >> 1) % 2]!, state: STATE[(j >> 2) % 2]! }));
const slice: AbiCaseSpec = {
  base: { d: 64, seq_len: C + 1, hyper: {}, alpha: "mid", theta: "large", state: "random", seed: 21 },
  B: 8, H: 4, C, extra, dyNull: false, dFinalNull: false,
};

describe("regime slice: delta, T = C + 1, d = 64, H = 4 (cpu-emu)", async () => {
  const lib = openKernelLib((await buildLib("cpu")).path, stateShapesOf);

  for (const [phase, run] of [["forward", forwardCase], ["backward", backwardCase]] as const) {
    test(phase, () => {
      const exercised = new Set<string>();
      const o = run(delta, false, lib, slice, exercised);
      expect(o.message ?? "").toBe("");
      expect(o.ok).toBe(true);
      expect(o.vacuous ?? false).toBe(false);
      expect(exercised.size).toBeGreaterThan(0);
    }, 60_000); // a production-sized case, every call run twice (docs/spec/hazards.md#determinism): seconds on a loaded machine
  }
});

// 35 more sequences for the many-heads case
const extra9 = Array.from({ length: 35 }, (_, j) => ({ seed: 900 + 11 * j, alpha: ALPHA[j % 3]!, theta: THETA[(j >> 1) % 2]!, state: STATE[(j >> 2) % 2]! }));
const heads: AbiCaseSpec = {
  base: { d: 8, seq_len: C + 1, hyper: {}, alpha: "mid", theta: "large", state: "random", seed: 23 },
  B: 4, H: 9, C, extra: extra9, dyNull: false, dFinalNull: false,
};

describe("regime slice: delta, H = 9 heads (B = 4), d = 8: a gate index modulo 8 fails", async () => {
  const lib = openKernelLib((await buildLib("cpu")).path, stateShapesOf);
  const dir = join(ROOT, "build", "test-libs");
  mkdirSync(dir, { recursive: true });
  const mod8Path = join(dir, "libplanted_mod8.so");
  const cc = Bun.spawnSync({
    cmd: ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-I", join(ROOT, "ffi"), "-DPLANT_MOD8", "-o", mod8Path, join(ROOT, "tests", "libs", "planted-delta.cpp")],
    stdout: "pipe", stderr: "pipe",
  });
  if (cc.exitCode !== 0) throw new Error(`building ${mod8Path} failed: ${cc.stderr.toString()}`);
  const mod8 = openKernelLib(mod8Path, stateShapesOf);

  test("the correct kernel passes forward and backward", () => {
    for (const run of [forwardCase, backwardCase]) {
      const o = run(delta, false, lib, heads, new Set<string>());
      expect(o.message ?? "").toBe("");
      expect(o.ok).toBe(true);
    }
  }, 60_000);

  test("the planted gate index modulo 8 passes the H = 4 slice (what CI saw before) and fails at H = 9, on a sequence of head 8", () => {
    expect(forwardCase(delta, false, mod8, slice, new Set<string>()).ok).toBe(true);
    const o = forwardCase(delta, false, mod8, heads, new Set<string>());
    expect(o.ok).toBe(false);
    // sequence n = b·H + h: head 8 of some b
    const seq = Number(/\(sequence (\d+)\)/.exec(o.message ?? "")?.[1]);
    expect(seq % 9).toBe(8);
  }, 60_000);
});
