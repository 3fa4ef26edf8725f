/**
 * The race and thread-mode checks compare two runs of every kernel output bit for bit
 * (conformance/kernel/native/bitwise.ts): the runs must hold every output of the forward and the backward,
 * per sequence, as arrays; one flipped bit in any of them fails naming the function, tensor and
 * sequence; a run that produced nothing fails instead of passing.
 */
import { expect, test } from "bun:test";
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { AbiCaseSpec } from "../cases/kernel-batch.ts";
import { compareRuns, runAllKernels } from "../conformance/kernel/native/bitwise.ts";
import { ruleByKey } from "../src/rules/index.ts";

const k: AbiCaseSpec = {
  base: { d: 3, seq_len: 5, hyper: {}, alpha: "mid", theta: "small", state: "random", seed: 7 }, B: 2, H: 1, C: 4,
  extra: Array.from({ length: 5 }, (_, j) => ({ seed: 70 + j, alpha: "low" as const, theta: "large" as const, state: "random" as const })),
  dyNull: false, dFinalNull: false,
};

test("every output of both kernels, per sequence; a flipped bit fails, an empty run fails", async () => {
  const lib = openKernelLib((await buildLib("cpu")).path, stateShapesOf);
  const delta = ruleByKey("delta");
  const a = runAllKernels(delta, false, lib, k), b = runAllKernels(delta, false, lib, k);
  expect(a.map((o) => `${o.fn} ${o.name} ${o.seq}`)).toEqual([0, 1].flatMap((n) => ["y", "M"].map((x) => `nlk_delta_forward ${x} ${n}`))
    .concat([0, 1].flatMap((n) => ["dk", "dv", "dq", "dalpha", "dtheta", "dM_0"].map((x) => `nlk_delta_backward ${x} ${n}`))));
  for (const o of a) expect(o.data.length).toBeGreaterThan(0);
  expect(compareRuns(a, b, "between runs").ok).toBe(true);
  const flipped = b.map((o) => ({ ...o, data: o.data.slice() }));
  const target = flipped.find((o) => o.name === "dM_0" && o.seq === 1)!;
  new Uint32Array(target.data.buffer)[2]! ^= 1;
  expect(compareRuns(a, flipped, "between runs").message).toMatch(/^nlk_delta_backward: output dM_0 \(sequence 1\)\[2\] differs between runs/);
  expect(compareRuns([], [], "between runs").ok).toBe(false);
  const frozen = runAllKernels(ruleByKey("titans"), true, lib, k);
  expect(new Set(frozen.map((o) => o.name))).toEqual(new Set(["y", "dq", "dM", "dS"]));
}, 300_000);
