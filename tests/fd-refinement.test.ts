/**
 * Finite differences that meet a strongly curved stretch inside their stencil
 * (docs/spec/tolerances.md#fd-refinement): the oracle detects it by a second Richardson estimate,
 * refines the step, and lists what it refined; a wrong gradient still fails after the refinement.
 */
import { expect, test } from "bun:test";
import { chunkMatrixChecks } from "../conformance/chunk/forms.ts";
import type { PropertyCheck } from "../harness/check.ts";
import { fdGradient, FD_EPS, refineGradientAt } from "../oracle/fd.ts";
import { gradCheck } from "../oracle/gradcheck.ts";
import { runCheck } from "../harness/run.ts";
import { TOL_FD } from "../oracle/compare.ts";
import { Tensor } from "../src/tensor.ts";

/**
 * A function whose curvature changes on a scale of 2e-5 around x = 1e-5 (as Moneta's L_q
 * normalisation does near a zero matrix): f(x) = x·(x² + s²)^(−0.185), s = 2e-5, and its exact derivative.
 */
const S = 2e-5, P = -0.185;
const f = (x: number) => x * Math.pow(x * x + S * S, P);
const df = (x: number) => Math.pow(x * x + S * S, P) + 2 * P * x * x * Math.pow(x * x + S * S, P - 1);

function curved(x0: number) {
  const t = new Tensor("f64", [1], Float64Array.of(x0));
  return { t, loss: () => f(t.data[0]!) };
}

test("the plain Richardson estimate is off inside a curved stencil; the refined one settles on the derivative", () => {
  const x0 = 1e-5, { t, loss } = curved(x0);
  const want = df(x0), bound = TOL_FD.atol + TOL_FD.rtol * Math.abs(want);
  expect(Math.abs(fdGradient(loss, t)[0]! - want)).toBeGreaterThan(bound);
  const r = refineGradientAt(loss, t, 0, (v) => 0.25 * (TOL_FD.atol + TOL_FD.rtol * Math.abs(v)));
  expect(r.settled).toBe(true);
  expect(r.step).toBeLessThan(FD_EPS);
  expect(Math.abs(r.value - want)).toBeLessThanOrEqual(bound);
  expect(t.data[0]).toBe(x0); // restored bit-exactly
});

test("gradCheck passes the exact derivative there and lists the refinement", () => {
  const { t, loss } = curved(1e-5);
  const r = gradCheck(loss, [{ name: "x", tensor: t, grad: [df(1e-5)] }], { fullMax: 10, directions: 0, seed: 1, floor: 0 });
  expect(r.ok).toBe(true);
  expect(r.details?.fd_refined).toBe(1);
});

test("planted: a gradient 1e-4 off (relative) still fails after the refinement", () => {
  const { t, loss } = curved(1e-5);
  const r = gradCheck(loss, [{ name: "x", tensor: t, grad: [df(1e-5) * (1 + 1e-4)] }], { fullMax: 10, directions: 0, seed: 1, floor: 0 });
  expect(r.ok).toBe(false);
  expect(r.message).toContain("x[0]");
});

test("planted in the directional path: a wrong gradient of many elements fails after the refinement", () => {
  const xs = Float64Array.from({ length: 400 }, (_, i) => 1e-5 * (1 + (i % 7) / 7));
  const t = new Tensor("f64", [400], xs.slice());
  const loss = () => { let s = 0; for (let i = 0; i < 400; i++) s += f(t.data[i]!); return s; };
  const good = Array.from(xs, df), bad = good.map((g, i) => (i === 3 ? g * 1.01 : g));
  expect(gradCheck(loss, [{ name: "x", tensor: t, grad: good }], { fullMax: 10, directions: 3, seed: 5, floor: 0 }).ok).toBe(true);
  expect(gradCheck(loss, [{ name: "x", tensor: t, grad: bad }], { fullMax: 10, directions: 3, seed: 5, floor: 0 }).ok).toBe(false);
});

test("C2/chunk-gd/moneta at the case that failed with the plain estimate (L_q path, q = 2.37, W2 = 0 at the start)", () => {
  const def = chunkMatrixChecks().find((c) => c.id === "C2/chunk-gd/moneta") as PropertyCheck<unknown>;
  const spec = { d: 2, seq_len: 5, hyper: { d_hidden: 2, p: 1, q: 2.365811347961426, lambda_2: 0.11664581298828125, sign_sharpness: 2 }, alpha: "high", theta: "small", state: "init", seed: 8 };
  const out = def.run([spec, 3]);
  expect(out.message).toBeUndefined();
  expect(out.ok).toBe(true);
  expect((out.details as { fd_refined?: number } | undefined)?.fd_refined).toBeGreaterThan(0);
});

test.each([15, 22, 145, 152])("C2/chunk-gd/moneta passes at run seed %d (failed with the plain estimate, or with seven halvings)", (seed) => {
  const def = chunkMatrixChecks().find((c) => c.id === "C2/chunk-gd/moneta")!;
  const r = runCheck(def, { seed, profile: "default" });
  expect(r.status, r.message).toBe("pass");
});
