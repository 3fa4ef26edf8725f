/**
 * A kernel failure message in the kernel's own terms (issue 35 item 6): the kernel's tensor names
 * first with ours in brackets, the element as (b, t, h, i) / (b, h, i, j), the report's worst on the
 * tensor and sequence the message names, a NaN explained as what it is for the backend kind, the
 * timeout's setting named, and the case as valid JSON.
 */
import { expect, test } from "bun:test";
import { comparedItems, kernelLabel, type KernelNames } from "../cases/kernel-tensors.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import type { PropertyCheck } from "../harness/check.ts";
import { spawnChild } from "../harness/child-process.ts";
import { caseText, runCheck } from "../harness/run.ts";
import { elementAt, flashCompare, type Compared } from "../oracle/kernel-judge.ts";
import { ruleCaseSpecArb } from "../cases/rule-case.ts";
import { ruleByKey } from "../src/rules/index.ts";

const seq = (y: number[], grads: Record<string, number[]>, dState0: Record<string, number[]> = {}): SeqTensors =>
  ({ y: Float64Array.from(y), state: {}, grads: Object.fromEntries(Object.entries(grads).map(([n, a]) => [n, Float64Array.from(a)])), dState0: Object.fromEntries(Object.entries(dState0).map(([n, a]) => [n, Float64Array.from(a)])) });

test("a py: kernel's tensors are named by its keywords first, ours in brackets", () => {
  const fla: KernelNames = { keywords: { theta: "beta", alpha: "g" }, initialState: "initial_state", stateDict: false, states: ["M"] };
  expect(kernelLabel({ part: "grad", name: "alpha" }, "dalpha", fla)).toBe("dg [dalpha]");
  expect(kernelLabel({ part: "grad", name: "theta" }, "dtheta", fla)).toBe("dbeta [dtheta]");
  expect(kernelLabel({ part: "grad", name: "k" }, "dk", fla)).toBe("dk");
  expect(kernelLabel({ part: "dState0", name: "M" }, "dM (initial state)", fla)).toBe("dinitial_state [dM (initial state)]");
  expect(kernelLabel({ part: "state", name: "M" }, "state M", fla)).toBe("final state [state M]");
  expect(kernelLabel({ part: "y" }, "y", fla)).toBe("y");
  // the outputs' names where the kernel declares them (nlc['outputs']): fla's o and final_state
  const named: KernelNames = { ...fla, outputs: { y: "o", M: "final_state" } };
  expect(kernelLabel({ part: "y" }, "y", named)).toBe("o [y]");
  expect(kernelLabel({ part: "state", name: "M" }, "state M", named)).toBe("final_state [state M]");
  expect(kernelLabel({ part: "dState0", name: "M" }, "dM (initial state)", named)).toBe("dinitial_state [dM (initial state)]");
  const two: KernelNames = { keywords: {}, initialState: "states", stateDict: true, states: ["M", "S"] };
  expect(kernelLabel({ part: "dState0", name: "S" }, "dS (initial state)", two)).toBe("dstates.S [dS (initial state)]");
  // through the judge: the message and the worst say the same thing
  const ref = [seq([1, 2], { alpha: [0.5, 0.25] })], bad = [seq([1, 2], { alpha: [0.5, 0.3] })];
  const out = flashCompare(comparedItems(bad, ref, ref, false, "py", false, fla), new Set(), "kernel", undefined, { layout: { B: 1, H: 1, T: 2 } });
  expect(out.message).toStartWith("dg [dalpha] (sequence 0): max |kernel - ref64| = 5.000e-2 at (b=0, t=1, h=0) ");
  expect(out.worst?.tensor).toBe("dg [dalpha][seq 0]");
});

test("elements are (b, t, h, i) of a per-token tensor and (b, h, i, j) of a square state, flat only without a layout", () => {
  const layout = { B: 2, H: 2, T: 3 };
  const tok = { part: "token" as const, seq: 3, ref64: new Float64Array(3 * 4) };
  expect(elementAt(tok, 7, layout)).toBe("(b=1, t=1, h=1, i=3)");
  expect(elementAt({ ...tok, ref64: new Float64Array(3) }, 2, layout)).toBe("(b=1, t=2, h=1)");
  expect(elementAt({ part: "state", seq: 2, ref64: new Float64Array(16) }, 6, layout)).toBe("(b=1, h=0, i=1, j=2)");
  expect(elementAt({ part: "state", seq: 1, ref64: new Float64Array(8) }, 5, layout)).toBe("(b=0, h=1, i=5)");
  expect(elementAt(tok, 7, undefined)).toBe("[7]");
  // a 63 as in the issue: y of [T=16, d=4] per sequence, sequence 1 of H = 2
  expect(elementAt({ part: "token", seq: 1, ref64: new Float64Array(64) }, 63, { B: 1, H: 2, T: 16 })).toBe("(b=0, t=15, h=1, i=3)");
});

const item = (name: string, seq: number, kernel: number[], ref: number[]): Compared =>
  ({ name, group: "grad", seq, part: "token", kernel: Float64Array.from(kernel), ref64: Float64Array.from(ref), ref32: Float64Array.from(ref) });

test("the headline is the tensor furthest over its bound, the others after it; the report's worst is the element the headline names", () => {
  // dk fails first in order (by 2%); dv, later, is much further off relative to its bound: the headline names dv
  const items = [
    item("dk", 0, [1.02, 1], [1, 1]),
    item("dv", 1, [1, 2], [1, 1]),
  ];
  const out = flashCompare(items, new Set(), "kernel", undefined, { layout: { B: 1, H: 2, T: 2 } });
  expect(out.message).toStartWith("dv (sequence 1): max |kernel - ref64| = 1.000e+0 at (b=0, t=1, h=1) ");
  expect(out.message).toMatch(/; also over its bound: dk \(sequence 0\) [\d.]+x its bound$/);
  expect(out.worst?.tensor).toBe("dv[seq 1]");
  expect(out.worst?.at).toBe("(b=0, t=1, h=1)");
  // one failing tensor: the message as before, nothing listed after it
  const one = flashCompare([item("dk", 0, [1.02, 1], [1, 1]), item("dv", 1, [1, 1], [1, 1])], new Set(), "kernel", undefined, { layout: { B: 1, H: 2, T: 2 } });
  expect(one.message).toStartWith("dk (sequence 0)");
  expect(one.message).not.toContain("also over its bound");
  // a NaN heads the message before any finite failure, whatever their order
  const nan = flashCompare([item("dk", 0, [3, 1], [1, 1]), item("dv", 1, [1, Number.NaN], [1, 1])], new Set(), "kernel", undefined, { layout: { B: 1, H: 2, T: 2 } });
  expect(nan.message).toStartWith("dv (sequence 1) at (b=0, t=1, h=1) is NaN");
  expect(nan.message).toMatch(/also over its bound: dk \(sequence 0\) [\d.]+x its bound$/);
});

test("a NaN is 'not written' only where outputs were NaN-filled (a native library), else computed by the kernel", () => {
  const items = () => [item("y", 0, [1, Number.NaN], [1, 1])];
  const native = flashCompare(items(), new Set(), "kernel", undefined, { layout: { B: 1, H: 1, T: 2 }, prefilled: true });
  expect(native.message).toContain("y (sequence 0) at (b=0, t=1, h=0) is NaN where the reference is 1");
  expect(native.message).toContain("the kernel did not write this element");
  const py = flashCompare(items(), new Set(), "kernel", undefined, { layout: { B: 1, H: 1, T: 2 } });
  expect(py.message).not.toContain("did not write");
  expect(py.message).toContain("computed this value");
  expect(py.worst?.tensor).toBe("y[seq 0]");
});

test("a counterexample is printed as valid JSON, also a record without a prototype", () => {
  const bare = Object.assign(Object.create(null) as object, { seed: 18, alpha: "high", x: Number.NaN });
  // fast-check's own printer (the message before) wrote this record as {__proto__:null,"seed":18,...}
  expect(JSON.parse(caseText({ extra: [bare] }))).toEqual({ extra: [{ seed: 18, alpha: "high", x: "NaN" }] });
  const def: PropertyCheck<object> = {
    kind: "property", id: "T/json", class: "C5", subject: {}, spec: "docs/spec/conformance.md#c5", tolerance: {},
    runs: { quick: 1, default: 1, deep: 1 }, arb: ruleCaseSpecArb(ruleByKey("delta")).map(() => bare), run: () => ({ ok: false, message: "planted" }),
  };
  const r = runCheck(def, { seed: 1, profile: "quick" });
  expect(r.status).toBe("fail");
  expect(JSON.parse(r.message!.split(" — case ")[1]!)).toEqual({ seed: 18, alpha: "high", x: "NaN" });
});

test("a child that times out names the setting its limit comes from", () => {
  const out = spawnChild({ cmd: ["sleep", "5"], timeoutSetting: "NLC_KERNEL_TIMEOUT=0.2 s" }, 200);
  expect(out.death).toBe("timed out after 0 s (killed); the limit: NLC_KERNEL_TIMEOUT=0.2 s");
});
