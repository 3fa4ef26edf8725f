/**
 * The default accumulate dtype of a py: kernel (docs/spec/precision.md#default-accumulate): an f32
 * PyTorch kernel that declares nothing is judged as summing in f32. tests/py-kernels/f32_sums.py:
 * the correct chunked Gated DeltaNet passes (it failed dα before, held to the f64-sum floor); the
 * same kernel declaring "accumulate": "f64" is held to that floor and fails; the planted 0.1% scale
 * errors still fail. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const k = (name: string) => `py:tests/py-kernels/f32_sums.py:${name}`;
const hasTorch = probeTorchSync().available;
const run = pyRun(() => ["chunk_gated", "chunk_gated_f64_declared", "chunk_gated_dg_scaled", "chunk_gated_y_scaled"].map(k));
const precisionOf = (r: { details?: unknown }) => (r.details as { precision?: unknown }).precision;

test.skipIf(!hasTorch)("py: an f32 chunked kernel that declares no accumulate dtype is judged as summing in f32 and passes", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("chunk_gated"), "gated_delta", kind);
    expectStatus(r, "pass");
    expect(precisionOf(r)).toEqual({ storage: "f32", state: "f32", accumulate: "f32" });
  }
}, 300_000);

test.skipIf(!hasTorch)("py: the same kernel declaring f64 sums is held to the f64-sum floor and fails dα", () => {
  const r = run.get(k("chunk_gated_f64_declared"), "gated_delta", "backward");
  expectStatus(r, "fail");
  expect(r.message).toContain("f32/f64-accumulate reference");
  // in the kernel's terms: its keyword g first, ours in brackets; the element as (b, t, h); worst on the same tensor
  expect(r.message).toMatch(/^dg \[dalpha\] \(sequence (\d+)\): max \|kernel - ref64\| = \S+ at \(b=\d+, t=\d+, h=\d+\) /);
  const n = /^dg \[dalpha\] \(sequence (\d+)\)/.exec(r.message!)![1];
  expect(r.worst?.tensor).toBe(`dg [dalpha][seq ${n}]`);
  expect(r.message).toContain(`at ${r.worst?.at} `);
}, 300_000);

test.skipIf(!hasTorch)("py: planted 0.1% scale errors fail under the default", () => {
  expectStatus(run.get(k("chunk_gated_dg_scaled"), "gated_delta", "backward"), "fail");
  expectStatus(run.get(k("chunk_gated_y_scaled"), "gated_delta", "forward"), "fail");
  expectStatus(run.get(k("chunk_gated_y_scaled"), "gated_delta", "backward"), "fail");
  // the control: the planted dg leaves the forward alone
  expectStatus(run.get(k("chunk_gated_dg_scaled"), "gated_delta", "forward"), "pass");
}, 300_000);
