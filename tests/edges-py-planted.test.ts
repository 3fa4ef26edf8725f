/**
 * The edge cases and contract checks of py: kernels (docs/spec/py-backend.md#edges, #contracts),
 * each proven by a planted kernel of tests/py-kernels/edges_planted.py that passes the generated
 * and the other declared cases and fails at its edge, by name: a chunked kernel that computes
 * 0 · inf at a partial last chunk under saturated gates, one wrong only at scale = 1, one that
 * silently computes B > 1 with cu_seqlens. The same kernels without the plant pass. Skipped
 * without PyTorch.
 */
import { expect, test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const FILE = "tests/py-kernels/edges_planted.py";
const hasTorch = probeTorchSync().available;
const k = (name: string) => `py:${FILE}:${name}`;
const run = pyRun(() => ["nan_partial_chunk", "chunk_gated_delta_rule", "scale_one_default", "naive_rsqrt", "batched_cu_seqlens", "batched_cu_seqlens_ok"].map(k));

test.skipIf(!hasTorch)("py: 0 · inf at a partial last chunk under saturated gates fails forward and backward, naming the saturated case", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("nan_partial_chunk"), "gated_delta", kind);
    expectStatus(r, "fail");
    expect(r.message).toContain("is NaN where the reference is");
    expect(r.message).toContain("case saturated gates");
    expect(r.message).toContain("T=19");
    expectStatus(run.get(k("chunk_gated_delta_rule"), "gated_delta", kind), "pass");
  }
}, 600_000);

test.skipIf(!hasTorch)("py: a kernel wrong only at scale = 1 fails at the declared scale case; the same kernel without the plant passes", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("scale_one_default"), "delta", kind);
    expectStatus(r, "fail");
    expect(r.message).toContain("case query scale 1:");
    expectStatus(run.get(k("naive_rsqrt"), "delta", kind), "pass");
  }
}, 600_000);

test.skipIf(!hasTorch)("py: a kernel that computes B > 1 with cu_seqlens fails its contract check; one that refuses passes; no varlen, no contract", () => {
  const bad = run.get(k("batched_cu_seqlens"), "delta", "contract");
  expectStatus(bad, "fail");
  expect(bad.message).toContain("accepted B = 2 with cu_seqlens = [0, 15, 16, 33]");
  expect(bad.message).toContain("returned y of shape [2, 33, 2, 4] instead of raising");
  // its numbers are right: only the contract check sees the defect
  for (const kind of ["forward", "backward"]) expectStatus(run.get(k("batched_cu_seqlens"), "delta", kind), "pass");
  const ok = run.get(k("batched_cu_seqlens_ok"), "delta", "contract");
  expectStatus(ok, "pass");
  expect(ok.message).toContain("refused B = 2 with cu_seqlens");
  expect(ok.message).toContain("cu_seqlens needs B = 1, got B = 2");
  const none = run.get(k("naive_rsqrt"), "delta", "contract");
  expectStatus(none, "skip");
  expect(none.message).toContain("declares no nlc['varlen']");
}, 600_000);
