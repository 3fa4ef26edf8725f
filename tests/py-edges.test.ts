/**
 * The py: edge cases' generator (conformance/kernel/python/edges.ts, docs/spec/py-backend.md#edges): the
 * saturated case puts every sequence's gates at its corner, in the kernel's parametrisation and
 * exactly in its dtype, and the reference's gradients there still carry values well above the
 * judge's near-zero line (a check of near-zero numbers is vacuous, not a pass). The scale case
 * takes the other scale. No PyTorch needed.
 */
import { expect, test } from "bun:test";
import { RULES } from "../src/rules/index.ts";
import type { InnerInputs, State } from "../src/rules/types.ts";
import { buildPyCase, toKernelGrads } from "../conformance/kernel/python/canonical-case.ts";
import { fromInnerGrads } from "../cases/kernel-tensors.ts";
import { EXERCISED } from "../oracle/kernel-judge.ts";
import { NO_CONVENTIONS, type Conventions } from "../conformance/kernel/python/conventions.ts";
import { edgeScaleValue, otherScale, pyEdgeExamples } from "../conformance/kernel/python/edges.ts";
import { saturatedExample } from "../cases/kernel-batch.ts";
import { saturatedCorner, SATURATED_LOG_GATE, SATURATED_THETA, SATURATED_TAIL } from "../cases/edge-gates.ts";
import { F32_STORE_F64_ACC } from "../oracle/kernel-judge.ts";
import { roundTo } from "../src/precision.ts";

const rule = (key: string) => RULES.find((d) => d.key === key)!;
/** fla's Gated DeltaNet as examples/py-kernels/fla_deltanet.py declares it. */
const FLA_GATED: Conventions = { absent: [], scale: { value: "rsqrt_dk", keyword: "scale" }, log_gates: { alpha: "g" }, bounded: ["theta"], qk_l2norm: true, accumulate: "f32" };
const PLAIN: Conventions = { ...NO_CONVENTIONS, scale: { value: 1, keyword: "scale" } };

/** Per sequence, the largest |gradient| w.r.t. the kernel's input `name`, from the f64 reference. */
function gradMax(key: string, conv: Conventions, name: string, storage: "f32" | "bf16" = "f32"): number[] {
  const decl = rule(key);
  const p = { ...F32_STORE_F64_ACC, storage };
  const c = buildPyCase(decl, saturatedExample(decl, false, 16, "canonical")!, false, p, conv);
  return c.seqs.map((q, n) => {
    const fw = decl.inner.forward(q.in64 as unknown as InnerInputs, q.st64 as State, c.cfg);
    const g = decl.inner.backward(fw.saved, q.in64 as unknown as InnerInputs, q.dy64, c.cfg, q.dFinal64 as State);
    const k = toKernelGrads(c, n, { y: fw.y.data, state: {}, ...fromInnerGrads(g) });
    return Math.max(...Array.from(k.grads[name]!, Math.abs));
  });
}

test("the saturated case: log gates in [-80, -30] at alpha -> 1, exactly 0 at alpha -> 0; theta at its corners; T = C + 3", () => {
  const decl = rule("gated_delta");
  const c = buildPyCase(decl, saturatedExample(decl, false, 16, "canonical")!, false, F32_STORE_F64_ACC, FLA_GATED);
  expect(c.T).toBe(16 + SATURATED_TAIL);
  expect(c.seqs.length).toBe(4);
  c.seqs.forEach((s, n) => {
    const { alphaHigh, thetaHigh } = saturatedCorner(n);
    for (const g of s.kin64.alpha!.data) {
      if (alphaHigh) {
        expect(g).toBeGreaterThanOrEqual(SATURATED_LOG_GATE[0]);
        expect(g).toBeLessThanOrEqual(SATURATED_LOG_GATE[1]);
        expect(roundTo("f32", g)).toBe(g);
      } else expect(g).toBe(0);
    }
    // the reference reads alpha = 1 - exp(g): 1 to within 1e-13, or exactly 0
    for (const a of s.in64.alpha!.data) expect(alphaHigh ? 1 - a < 1e-13 : a === 0).toBe(true);
    for (const t of s.kin64.theta!.data) expect(t).toBe(thetaHigh ? SATURATED_THETA.high : SATURATED_THETA.low);
  });
});

test("the saturated case's gradients are not near zero: dg and dbeta carry values far above the judge's line in some sequence", () => {
  // at alpha -> 1 the log gate's gradient -exp(g) dalpha is below 1e-13: the alpha -> 0 sequences carry it
  const dg = gradMax("gated_delta", FLA_GATED, "alpha");
  expect(Math.max(dg[0]!, dg[2]!)).toBeLessThan(1e-10);
  expect(Math.max(dg[1]!, dg[3]!)).toBeGreaterThan(1e3 * EXERCISED);
  const dbeta = gradMax("gated_delta", FLA_GATED, "theta");
  for (const n of [0, 1, 2, 3]) expect(dbeta[n]!).toBeGreaterThan(1e3 * EXERCISED);
  // a kernel that takes alpha itself (no log space): alpha = 1 and 0 exactly, dalpha informative in both
  const da = gradMax("delta", PLAIN, "alpha");
  expect(Math.min(...da)).toBeGreaterThan(1e3 * EXERCISED);
  const dk = gradMax("delta", PLAIN, "k", "bf16");
  expect(Math.min(...dk)).toBeGreaterThan(1e2 * EXERCISED);
});

test("the scale case: 1 for a kernel usually called at d^-1/2, d^-1/2 for one usually called at 1; none for a kernel without a scale keyword", () => {
  expect(otherScale(FLA_GATED)).toEqual({ kind: "scale", scale: 1 });
  expect(otherScale(PLAIN)).toEqual({ kind: "scale", scale: "rsqrt_dk" });
  expect(otherScale(NO_CONVENTIONS)).toBeNull();
  expect(otherScale({ ...NO_CONVENTIONS, scale: { value: "rsqrt_dk", keyword: null } })).toBeNull();
  expect(edgeScaleValue({ kind: "scale", scale: "rsqrt_dk" }, 4)).toBe(0.5);
  // the reference reads q at the edge's scale
  const decl = rule("gated_delta");
  const [sat, sc] = pyEdgeExamples(decl, 16, FLA_GATED, false, decl.gates);
  expect(sat!.edge).toEqual({ kind: "saturated" });
  const c = buildPyCase(decl, sc!, false, F32_STORE_F64_ACC, { ...FLA_GATED, qk_l2norm: false });
  const s = c.seqs[0]!;
  expect(Array.from(s.in64.q!.data)).toEqual(Array.from(s.kin64.q!.data));
  // a frozen read has no gates to saturate; a kernel that computes a gate itself (gate_forms) keeps it as generated
  expect(pyEdgeExamples(decl, 16, FLA_GATED, true, decl.gates).map((e) => e.edge?.kind)).toEqual(["scale"]);
  expect(pyEdgeExamples(decl, 16, { ...NO_CONVENTIONS, gate_forms: { alpha: { form: "softplus", flags: [], A_log: "A_log", dt_bias: null }, theta: { form: "sigmoid", flags: [] } } as never }, false, decl.gates)).toEqual([]);
});
