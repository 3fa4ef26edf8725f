/**
 * `nlc['forward_only']` (docs/spec/py-backend.md#forward-only): a kernel without a backward has its
 * forward judged and each backward check skipped with that reason, never passed; a malformed or
 * contradictory declaration is a load error naming it (the backend unavailable, its checks skipped). Skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { expectStatus, expectUnavailable, pyRun } from "./py-run.ts";

const torch = probeTorchSync();
const K = (k: string) => `py:tests/py-kernels/forward_only.py:${k}`;

describe.skipIf(!torch.available)("forward-only py: kernels", () => {
  const { get } = pyRun(() => [K("declared"), K("not_a_bool"), K("WithBackward")]);

  test("the forward is judged and passes; the backward is a skip that says why", () => {
    expectStatus(get(K("declared"), "delta", "forward"), "pass");
    const bw = get(K("declared"), "delta", "backward");
    expectStatus(bw, "skip");
    expect(bw.message).toContain("declares itself forward-only");
  }, 300_000);

  test("forward_only that is not a bool, or beside a backward method, does not load", () => {
    for (const kind of ["forward", "backward"]) {
      expectUnavailable(get(K("not_a_bool"), "delta", kind), "nlc['forward_only']: expected True or False");
      expectUnavailable(get(K("WithBackward"), "delta", kind), "has an explicit backward");
    }
  }, 300_000);
});
