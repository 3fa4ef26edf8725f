/**
 * Packed variable-length batches (docs/spec/py-backend.md#packed) on the planted kernels of
 * tests/py-kernels/varlen_leak_planted.py: a delta kernel that takes `cu_seqlens` passes, judged on
 * the declared packed case (lengths [15, 1, 17], C = 16) beside the generated ones; the kernels that
 * leak one packed sequence's final state into the next (all of it, or 1/64 of it) fail that case,
 * named by its packed layout, forward and backward. The frozen read is judged on packed batches too.
 * A kernel that declares no `varlen` runs no packed case; one that declares it without taking the keyword is an error naming it. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { expectStatus, expectUnavailable, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const FILE = "tests/py-kernels/varlen_leak_planted.py";
const NAIVE = "py:examples/py-kernels/naive_delta.py:naive_delta";
const hasTorch = probeTorchSync().available;
const k = (name: string) => `py:${FILE}:${name}`;
const run = pyRun(() => [...["packed", "leak", "leak_small", "no_keyword", "packed_read"].map(k), NAIVE]);

type Shapes = { T: number[]; packed?: { batches: number; sequences: number[]; lengths: number[] } };
const shapes = (r: { details?: unknown }) => (r.details as { shapes: Shapes }).shapes;

test.skipIf(!hasTorch)("py: packed batches: the correct kernel passes, with the packed lengths in details.shapes", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("packed"), "delta", kind);
    expectStatus(r, "pass");
    expect(shapes(r).packed?.lengths).toEqual(expect.arrayContaining([1, 15, 17]));
  }
  // the frozen read on packed batches: each token reads its own sequence's state
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("packed_read"), "delta.frozen", kind);
    expectStatus(r, "pass");
    expect(shapes(r).packed?.batches).toBeGreaterThan(0);
  }
  // a kernel that declares no varlen is judged as before: no packed case
  const naive = run.get(NAIVE, "delta", "forward");
  expectStatus(naive, "pass");
  expect(shapes(naive).packed).toBeUndefined();
}, 300_000);

test.skipIf(!hasTorch)("py: packed batches: a state leaking from one packed sequence into the next fails the declared packed case", () => {
  for (const name of ["leak", "leak_small"]) {
    for (const kind of ["forward", "backward"]) {
      const r = run.get(k(name), "delta", kind);
      expectStatus(r, "fail");
      expect(r.message).toContain("case packed: {sequences: 3, lengths: [15, 1, 17]} (sequence n = i·H + h) B=1 H=2 T=33");
      // the declared cases are the first two runs: T = C + 1, then the packed one
      expect(r.path).toBe("1");
      expect(r.replay).toContain(`--backend ${k(name)}`);
    }
  }
}, 300_000);

test.skipIf(!hasTorch)("py: nlc.varlen without the keyword in the forward's signature makes the backend unavailable, naming it", () => {
  expectUnavailable(run.get(k("no_keyword"), "delta", "forward"), "nlc['varlen'] declares packed batches under the keyword 'cu_seqlens', which its forward does not take");
}, 300_000);
