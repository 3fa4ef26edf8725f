/**
 * Gates taken once per head (docs/spec/py-backend.md#per-head), end to end through `--backend py:`,
 * without fla: an RWKV-6 kernel in plain PyTorch with the signature of fla's `fused_recurrent_rwkv6`
 * (examples/py-kernels/rwkv6_torch.py, the bonus u [H, K]) passes forward and backward declared with
 * `per_head`; with its bonus on reversed key channels (rwkv6_torch_planted.py) it fails both ways;
 * declared without `per_head` it receives u per token and its error says so. Skipped without
 * python3 + torch.
 */
import { expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { expectStatus, pyRun } from "./py-run.ts";

const torch = probeTorchSync();
const OK = "py:examples/py-kernels/rwkv6_torch.py:rwkv6";
const BAD = (k: string) => `py:examples/py-kernels/rwkv6_torch_planted.py:${k}`;

const run = pyRun(() => [OK, BAD("rwkv6_bonus_reversed"), BAD("rwkv6_not_per_head")]);

test.skipIf(!torch.available)("a bonus per head declared per_head: passes forward and backward, the per-head gate listed as not compared", () => {
  for (const phase of ["forward", "backward"]) {
    const r = run.get(OK, "rwkv6", phase);
    expectStatus(r, "pass");
    expect(r.details?.per_head).toEqual(["theta"]);
    // every other input's gradient is compared, theta's is not
    if (phase === "backward") expect(Object.keys(r.details?.tensors as object).sort()).toEqual(["dM (initial state)", "dalpha", "dk", "dq", "dv"]);
  }
}, 600_000);

test.skipIf(!torch.available)("planted: the bonus on reversed key channels fails forward (o) and backward; undeclared, the per-token u is an error", () => {
  const fw = run.get(BAD("rwkv6_bonus_reversed"), "rwkv6", "forward");
  expectStatus(fw, "fail");
  expect(fw.message).toContain("o [y]");
  expectStatus(run.get(BAD("rwkv6_bonus_reversed"), "rwkv6", "backward"), "fail");
  const undeclared = run.get(BAD("rwkv6_not_per_head"), "rwkv6", "forward");
  expectStatus(undeclared, "error");
  expect(undeclared.message).toContain("rwkv6_not_per_head raised RuntimeError");
}, 600_000);
