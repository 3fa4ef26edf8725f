/**
 * The declaration vocabulary for kernels as flash-linear-attention ships them
 * (docs/spec/py-backend.md#gate-forms, #input-dtypes, #head-dims), checked in f64 without Python:
 * each gate form's map to the reference's gate round-trips the drawn gate, its kernel-side gradient
 * is the transpose of that map (central differences), per head and per channel.
 */
import { describe, expect, test } from "bun:test";
import { declaredHeadDim, gateParams, kernelGradient, kernelValue, NO_CONVENTIONS, referenceValue, type Conventions } from "../conformance/kernel/python/conventions.ts";
import { Rng } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";

const softplusConv: Conventions = { ...NO_CONVENTIONS, gate_forms: { alpha: { form: "softplus", A_log: "A_log", dt_bias: "dt_bias" } } };
const noBias: Conventions = { ...NO_CONVENTIONS, gate_forms: { alpha: { form: "softplus", A_log: "A_log", dt_bias: null } } };
const sigmoidConv: Conventions = { ...NO_CONVENTIONS, gate_forms: { theta: { form: "sigmoid" } } };
const sigmoid2Conv: Conventions = { ...NO_CONVENTIONS, gate_forms: { theta: { form: "sigmoid2" } } };

function rand(rng: Rng, shape: number[], lo: number, hi: number): Tensor {
  const t = new Tensor("f64", shape);
  for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
  return t;
}

describe("gate forms (f64)", () => {
  const d = 5, T = 3;
  const cases: [string, Conventions, string, number[]][] = [
    ["softplus, a gate per channel", softplusConv, "alpha", [T, d]], ["softplus, a gate per token", softplusConv, "alpha", [T]],
    ["softplus without dt_bias", noBias, "alpha", [T, d]], ["sigmoid", sigmoidConv, "theta", [T]], ["sigmoid2", sigmoid2Conv, "theta", [T]],
  ];

  for (const [what, conv, name, shape] of cases) {
    test(`${what}: the drawn gate round-trips and the raw gradient is the map's transpose, at every head`, () => {
      const rng = new Rng(11);
      for (const h of [0, 1, 2, 3, 5]) {
        const gate = rand(rng, shape, 0.05, 0.95);
        const raw = kernelValue(conv, name, gate, rng, h);
        const back = referenceValue(conv, name, raw, d, h).data;
        // theta under a sigmoid form is drawn bounded, θ/(1 + θ); sigmoid2 doubles it into (0, 2)
        const want = name === "alpha" ? gate.data : Float64Array.from(gate.data, (x) => (conv === sigmoid2Conv ? 2 : 1) * (x / (1 + x)));
        for (let i = 0; i < want.length; i++) expect(Math.abs(back[i]! - want[i]!)).toBeLessThan(1e-12);
        const w = rand(rng, [raw.size], -1, 1).data;
        const width = shape.length > 1 ? d : 1;
        const g = kernelGradient(conv, name, raw.data, w, d, undefined, h, width);
        const eps = 1e-6;
        for (let i = 0; i < raw.size; i++) {
          const at = (delta: number) => {
            const x = new Tensor("f64", [...raw.shape], Float64Array.from(raw.data));
            x.data[i]! += delta;
            const r = referenceValue(conv, name, x, d, h).data;
            let s = 0;
            for (let j = 0; j < r.length; j++) s += w[j]! * r[j]!;
            return s;
          };
          expect(Math.abs(g[i]! - (at(eps) - at(-eps)) / (2 * eps))).toBeLessThan(1e-8);
        }
      }
    });
  }

  test("sigmoid2 spans (0, 2): drawn gates above 1/2 reach the negative-eigenvalue range β > 1", () => {
    const raw = kernelValue(sigmoid2Conv, "theta", new Tensor("f64", [3], Float64Array.from([0.5, 3, 19])), new Rng(1));
    expect(Array.from(referenceValue(sigmoid2Conv, "theta", raw, 4).data).map((x) => Number(x.toFixed(12)))).toEqual([0.666666666667, 1.5, 1.9]);
  });

  test("a softplus gate's per-head parameters differ by head and channel and are exact in bf16 (multiples of 1/8)", () => {
    const a = [0, 1, 2, 3].map((h) => gateParams(h, 0).A_log);
    expect(new Set(a).size).toBe(4);
    expect(new Set([0, 1, 2, 3, 4].map((i) => gateParams(1, i).dt_bias)).size).toBe(5);
    for (let h = 0; h < 8; h++) for (let i = 0; i < 8; i++) for (const v of Object.values(gateParams(h, i))) expect(v * 8).toBe(Math.round(v * 8));
    // the same drawn gate gives another raw value at another head: a kernel that reads head 0's parameters for head 1 fails
    const gate = new Tensor("f64", [1, 2], Float64Array.from([0.3, 0.6]));
    expect(kernelValue(softplusConv, "alpha", gate, new Rng(1), 0).data[0]).not.toBe(kernelValue(softplusConv, "alpha", gate, new Rng(1), 1).data[0]);
  });

  test("head_dims pow2 rounds the generated d down to a power of two; undeclared, d is unchanged", () => {
    expect([1, 2, 3, 4, 5, 7, 8, 12].map((d) => declaredHeadDim({ ...NO_CONVENTIONS, head_dims: "pow2" }, d))).toEqual([1, 2, 2, 4, 4, 4, 8, 8]);
    expect(declaredHeadDim(NO_CONVENTIONS, 12)).toBe(12);
  });
});
