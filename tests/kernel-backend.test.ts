/**
 * The kernel backend contract's shared parts (cases/kernel-backend.ts, docs/spec/kernel-abi.md#kernel-backends):
 * the one reference path of a kernel case (oracle/kernel-reference.ts) — its phases are parts of one
 * run, a NULL upstream gradient is a zero one — and a planted wrong reference (dy doubled) is
 * caught by the judge.
 */
import { expect, test } from "bun:test";
import { innerCase, sampleRuleCaseSpecs } from "../cases/inner-case.ts";
import { comparedItems } from "../cases/kernel-tensors.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import { referenceRun } from "../oracle/kernel-reference.ts";
import { F32_STORE_F64_ACC, flashCompare } from "../oracle/kernel-judge.ts";
import { RULES } from "../src/rules/index.ts";
import { Tensor } from "../src/tensor.ts";

/** Every tensor's values by part and name, in a fixed order. */
const bits = (r: SeqTensors) => JSON.stringify(r, (_, v) => (ArrayBuffer.isView(v) ? [...(v as Float64Array)]
  : v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v));
const part = (r: SeqTensors, keep: "forward" | "backward"): SeqTensors =>
  keep === "forward" ? { ...(r.y !== undefined ? { y: r.y } : {}), state: r.state, grads: {}, dState0: {} } : { state: {}, grads: r.grads, dState0: r.dState0 };

test("the reference path: forward and backward are the parts of one run, bitwise, for every rule and its frozen read", () => {
  for (const decl of RULES) {
    for (const frozen of decl.frozen === null ? [false] : [false, true]) {
      const [spec] = sampleRuleCaseSpecs(decl, { d: [3, 3], seq_len: [5, 5] }, 7, 1);
      const c = innerCase(decl, { ...spec!, state: "random" }, frozen);
      const both = referenceRun(decl, frozen, c, c.cfg, "both");
      expect(bits(referenceRun(decl, frozen, c, c.cfg, "forward"))).toBe(bits(part(both, "forward")));
      expect(bits(referenceRun(decl, frozen, c, c.cfg, "backward"))).toBe(bits(part(both, "backward")));
      expect(both.y!.length).toBe(c.cfg.seq_len * c.cfg.d);
      expect(Object.keys(both.grads).length).toBeGreaterThan(0);
    }
  }
});

test("the reference path: dy NULL is dy = 0, d(final state) NULL is no d(final state)", () => {
  const decl = RULES.find((d) => d.key === "delta")!;
  const [spec] = sampleRuleCaseSpecs(decl, { d: [3, 3], seq_len: [4, 4] }, 3, 1);
  const c = innerCase(decl, { ...spec!, state: "random" }, false);
  const zeroDy = { ...c, dy: new Tensor("f64", [...c.dy.shape]) };
  expect(bits(referenceRun(decl, false, c, c.cfg, "backward", { dyNull: true }))).toBe(bits(referenceRun(decl, false, zeroDy, c.cfg, "backward")));
  const { dFinal: _, ...noFinal } = c;
  expect(bits(referenceRun(decl, false, c, c.cfg, "backward", { dFinalNull: true }))).toBe(bits(referenceRun(decl, false, noFinal, c.cfg, "backward")));
});

test("planted: a reference whose backward takes 2·dy is caught by the judge against the true reference", () => {
  const decl = RULES.find((d) => d.key === "delta")!;
  const [spec] = sampleRuleCaseSpecs(decl, { d: [4, 4], seq_len: [6, 6] }, 5, 1);
  const c = innerCase(decl, { ...spec!, state: "random" }, false);
  const truth = referenceRun(decl, false, c, c.cfg, "backward");
  const judge = (kernel: SeqTensors) =>
    flashCompare(comparedItems([kernel], [truth], [truth], false, "abi", true), new Set(), "planted", F32_STORE_F64_ACC, { prefilled: true });
  expect(judge(truth).ok).toBe(true);
  const twice = { ...c, dy: new Tensor("f64", [...c.dy.shape], c.dy.data.map((x) => 2 * x)) };
  const planted = judge(referenceRun(decl, false, twice, c.cfg, "backward"));
  expect(planted.ok).toBe(false);
  expect(planted.message).toMatch(/dk|dv|dq/);
});
