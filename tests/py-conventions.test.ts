/**
 * Kernels in flash-linear-attention's conventions through `--backend py:` (docs/spec/py-backend.md#conventions):
 * the fla-style DeltaNet and Gated DeltaNet adaptors of examples/py-kernels (recurrent and chunked,
 * f32 and bf16; a few lines of declaration, no arithmetic) pass; the planted variants fail; an
 * input a kernel does not take or ignores is an error naming it (docs/spec/py-backend.md#absent).
 * One suite run with every backend (the Python hosts are slow to start). Skipped without python3 + torch.
 *
 * The convention maps themselves (conformance/kernel/python/conventions.ts) are checked in f64 without Python:
 * the kernel-side gradient is the transpose of the map to the reference's inputs.
 */
import { describe, expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { cli, expectStatus, pyRun } from "./py-run.ts";
import { absentInputs, kernelGradient, kernelValue, NO_CONVENTIONS, referenceValue, type Conventions } from "../conformance/kernel/python/conventions.ts";
import { kernelPrecision } from "../conformance/kernel/python/session.ts";
import { Rng } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";

const torch = probeTorchSync();


const FLA = (k: string) => `py:examples/py-kernels/fla_deltanet.py:${k}`;
const PLANTED = (k: string) => `py:examples/py-kernels/fla_deltanet_planted.py:${k}`;
/** [backend, rule] of every correct adaptor. */
const GOOD: [string, string][] = ["", "_bf16"].flatMap((sfx) => [
  [FLA(`fused_recurrent_delta_rule${sfx}`), "delta"], [FLA(`chunk_delta_rule${sfx}`), "delta"],
  [FLA(`fused_recurrent_gated_delta_rule${sfx}`), "gated_delta"], [FLA(`chunk_gated_delta_rule${sfx}`), "gated_delta"],
] as [string, string][]);

describe("convention maps (f64)", () => {
  const conv: Conventions = { ...NO_CONVENTIONS, scale: { value: "rsqrt_dk", keyword: "scale" }, log_gates: { alpha: "g" }, qk_l2norm: true, bounded: ["theta"] };
  const d = 4, T = 3;
  const rng = new Rng(7);
  const rand = (shape: number[], lo: number, hi: number) => {
    const t = new Tensor("f64", shape);
    for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
    return t;
  };

  test("the kernel-side gradient is the transpose of the map to the reference's inputs (central differences)", () => {
    for (const [name, kin] of [["q", rand([T, d], -1, 1)], ["k", rand([T, d], -1, 1)], ["alpha", rand([T], -3, -0.05)]] as const) {
      const w = rand([kin.size], -1, 1).data; // loss = <w, referenceValue(kin)>
      const g = kernelGradient(conv, name, kin.data, w, d);
      const h = 1e-6;
      for (let i = 0; i < kin.size; i++) {
        const at = (delta: number) => {
          const x = new Tensor("f64", [...kin.shape], Float64Array.from(kin.data));
          x.data[i]! += delta;
          const r = referenceValue(conv, name, x, d).data;
          let s = 0;
          for (let j = 0; j < r.length; j++) s += w[j]! * r[j]!;
          return s;
        };
        expect(Math.abs(g[i]! - (at(h) - at(-h)) / (2 * h))).toBeLessThan(1e-7);
      }
    }
  });

  test("q is scaled by d^-1/2 after normalisation; a log-space gate maps back exactly; raw q, k are not unit vectors", () => {
    const qRaw = kernelValue(conv, "q", new Tensor("f64", [1, d], Float64Array.from([0.5, 0.5, 0.5, 0.5])), new Rng(3));
    expect(Math.hypot(...qRaw.data)).not.toBeCloseTo(1, 3);
    const qRef = referenceValue(conv, "q", qRaw, d);
    expect(Math.hypot(...qRef.data)).toBeCloseTo(0.5, 12);
    const g = kernelValue(conv, "alpha", new Tensor("f64", [2], Float64Array.from([0.05, 0.95])), new Rng(1));
    expect(Array.from(referenceValue(conv, "alpha", g, d).data).map((x) => Number(x.toFixed(12)))).toEqual([0.05, 0.95]);
    expect(Array.from(kernelValue(conv, "theta", new Tensor("f64", [2], Float64Array.from([0.8, 3])), new Rng(1)).data)).toEqual([0.8 / 1.8, 0.75]);
  });

  test("absent inputs: alpha and eta have neutral values; any other is an error naming it", () => {
    expect(absentInputs({ ...NO_CONVENTIONS, absent: ["alpha", "eta"] }, ["k", "v", "q", "alpha", "theta"], "k")).toEqual(["alpha"]);
    expect(() => absentInputs({ ...NO_CONVENTIONS, absent: ["theta"] }, ["theta"], "my kernel")).toThrow(/my kernel: nlc\['absent'\] lists theta, which has no neutral value/);
    const zero = kernelValue({ ...NO_CONVENTIONS, absent: ["alpha"] }, "alpha", new Tensor("f64", [3], Float64Array.from([0.5, 0.9, 0.1])), new Rng(1));
    expect(Array.from(zero.data)).toEqual([0, 0, 0]);
  });

  test("an f32 kernel is judged with the f32-sum floor unless it declares f64 sums", () => {
    expect(kernelPrecision({ dtype: "f32", state_dtype: "f32", conventions: { ...NO_CONVENTIONS, accumulate: "f32" } })).toEqual({ storage: "f32", state: "f32", accumulate: "f32" });
    expect(kernelPrecision({ dtype: "f32", state_dtype: "f32", conventions: NO_CONVENTIONS }).accumulate).toBe("f32");
    expect(kernelPrecision({ dtype: "f32", state_dtype: "f32" }).accumulate).toBe("f32");
    expect(kernelPrecision({ dtype: "f32", state_dtype: "f32", conventions: { ...NO_CONVENTIONS, accumulate: "f64" } })).toEqual({ storage: "f32", state: "f32", accumulate: "f64" });
  });
});

test("--rule with --filter selects the checks matching both", () => {
  const p = cli(["--backend", FLA("chunk_delta_rule"), "--filter", "C5/py-", "--rule", "delta", "--list"]);
  expect(p.exitCode).toBe(0);
  const ids = p.stdout.toString().split("\n").filter((l) => l.startsWith("C"));
  expect(ids).toEqual(["delta/forward", "delta/backward", "delta/contract", "delta.frozen/forward", "delta.frozen/backward"].map((k) => `C5/py-chunk_delta_rule/${k}`));
  const none = cli(["--filter", "C2", "--rule", "no_such_rule", "--list"]);
  expect(none.exitCode).toBe(2);
  expect(none.stderr.toString()).toContain("--rule 'no_such_rule'");
});

describe.skipIf(!torch.available)("fla-style kernels through py:", () => {
  const planted = ["gated_corrects_first", "chunk_gated_dbeta_scaled_bf16", "chunk_gated_no_decay_in_w", "deltanet_ignores_alpha",
    "deltanet_undeclared", "deltanet_scale_undeclared"].map(PLANTED);
  // the rules the kernels do not declare are skips (no kernel call)
  const { get } = pyRun(() => [...GOOD.map(([b]) => b), ...planted]);

  test("DeltaNet (alpha absent) and Gated DeltaNet (g in log space), recurrent and chunked, f32 and bf16, pass", () => {
    for (const [b, rule] of GOOD) {
      for (const kind of ["forward", "backward"]) {
        const r = get(b, rule, kind);
        expectStatus(r, "pass");
        expect(r.details?.absent).toEqual(rule === "delta" ? ["alpha"] : []);
        expect((r.details?.precision as { accumulate: string }).accumulate).toBe("f32");
      }
      // an absent input's gradient is not compared
      expect(Object.keys(get(b, rule, "backward").details?.tensors as object)).toEqual(
        rule === "delta" ? ["dk", "dv", "dq", "dtheta", "dM (initial state)"] : ["dk", "dv", "dq", "dalpha", "dtheta", "dM (initial state)"]);
    }
  }, 600_000);

  test("planted kernels fail: decay after the correction, dbeta x (1 + 1/128) in bf16, a dropped decay, an undeclared scale", () => {
    expectStatus(get(PLANTED("gated_corrects_first"), "gated_delta", "forward"), "fail");
    expectStatus(get(PLANTED("chunk_gated_dbeta_scaled_bf16"), "gated_delta", "forward"), "pass");
    const db = get(PLANTED("chunk_gated_dbeta_scaled_bf16"), "gated_delta", "backward");
    expectStatus(db, "fail");
    expect(db.message).toMatch(/^dbeta \[dtheta\] \(sequence \d+\)/);
    expectStatus(get(PLANTED("chunk_gated_no_decay_in_w"), "gated_delta", "forward"), "fail");
    expectStatus(get(PLANTED("deltanet_scale_undeclared"), "delta", "forward"), "fail");
  }, 600_000);

  test("an input the kernel does not take, or takes and ignores, is an error naming it", () => {
    for (const kind of ["forward", "backward"]) {
      const missing = get(PLANTED("deltanet_undeclared"), "delta", kind);
      expectStatus(missing, "error");
      expect(missing.message).toContain("does not take the input alpha (keyword 'alpha') that delta reads");
      expect(missing.message).toContain("declare it in nlc['absent'] if the kernel has no such input, or its keyword in nlc['names'] if the kernel takes it under another name");
      const ignored = get(PLANTED("deltanet_ignores_alpha"), "delta", kind);
      expectStatus(ignored, "error");
      expect(ignored.message).toContain("accepts the input alpha (keyword 'alpha') but ignores it");
      // both causes: the op does not read it (absent), or the kernel fails to read what it should
      expect(ignored.message).toContain("declare it in nlc['absent']; or the kernel should read it and does not");
    }
  }, 600_000);
});
