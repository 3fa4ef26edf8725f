/**
 * CI's slice of the regime profile (docs/spec/conformance.md#regime): one rule at one production
 * shape — Delta on the cpu-emu build, T = C + 1 at the default chunk size C = 16, d = 64, H = 4
 * heads × B = 8 (B·H = 32 sequences, each with its own gates and state), checkpoint interval C —
 * through C5's forward and backward cases. The whole profile runs with `--profile regime`.
 */
import { describe, expect, test } from "bun:test";
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { KSpec } from "../conformance/c5/batch.ts";
import { backwardCase, forwardCase } from "../conformance/c5/forward-backward.ts";
import { DEFAULT_CHUNK_SIZES } from "../cases/kernel-batch.ts";
import { ruleByKey } from "../src/rules/index.ts";

const delta = ruleByKey("delta");
const C = Math.min(...DEFAULT_CHUNK_SIZES);
const ALPHA = ["mid", "low", "high"] as const, THETA = ["small", "large"] as const, STATE = ["init", "random"] as const;
// 31 more sequences, each with its own seed, gate levels and initial state
const extra = Array.from({ length: 31 }, (_, j) => ({ seed: 500 + 7 * j, alpha: ALPHA[j % 3]!, theta: THETA[(j >> 1) % 2]!, state: STATE[(j >> 2) % 2]! }));
const slice: KSpec = {
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
    });
  }
});
