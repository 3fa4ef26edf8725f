/**
 * `token_rows` (docs/spec/py-backend.md#token-rows): a kernel that lays a rule's several rows per
 * token along the time axis, as fla's Gated DeltaProduct does (k, v [B, T·n_h, H, d], β [B, T·n_h, H],
 * n_h passed as `num_householder`), judged by declaration alone. A Gated DeltaProduct kernel in
 * plain PyTorch with fla's signature (examples/py-kernels/delta_product_torch.py) passes forward
 * and backward over n_h = 1, 2, 3; the same kernel reading its steps token-minor (row j·T + t) fails
 * both; the declaration is refused for a rule with one row per token and for an unknown layout.
 * One suite run with every backend. Skipped without python3 + torch.
 */
import { expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { ROOT } from "../paths.ts";
import { expectStatus, expectUnavailable, pyRun } from "./py-run.ts";

const torch = probeTorchSync();
const OK = "py:examples/py-kernels/delta_product_torch.py:delta_product";
const BAD = (k: string) => `py:examples/py-kernels/delta_product_torch_planted.py:${k}`;
const RULE = "gated_delta_product";

const run = pyRun(() => [OK, ...["steps_token_minor", "rows_on_delta", "rows_layout_typo"].map(BAD)]);

test.skipIf(!torch.available)("steps along time declared: the PyTorch Gated DeltaProduct in fla's layout passes forward and backward", () => {
  for (const phase of ["forward", "backward"]) expectStatus(run.get(OK, RULE, phase), "pass");
}, 600_000);

test.skipIf(!torch.available)("planted: the steps read token-minor (row j·T + t) fail forward and backward", () => {
  for (const phase of ["forward", "backward"]) expectStatus(run.get(BAD("steps_token_minor"), RULE, phase), "fail");
}, 600_000);

test.skipIf(!torch.available)("token_rows on a rule with one row per token, and an unknown layout, are load errors naming them", () => {
  expectUnavailable(run.get(BAD("rows_on_delta"), "delta", "forward"), "the rule 'delta' has one row per token of every input");
  expectUnavailable(run.get(BAD("rows_layout_typo"), RULE, "forward"), "nlc['token_rows']['layout']: expected 'width' or 'time', got 'along_time'");
}, 600_000);

test.skipIf(!torch.available)("the host's row moves: ours [B, T, H, n·d] to time-major rows and back, by index", () => {
  const script = [
    "import torch, sys",
    "sys.path.insert(0, 'python')",
    "from nlc_torch.kernel_declaration import Kernel",
    "from nlc_torch.kernel_layout import from_kernel_rows, rows_shape, to_kernel_rows",
    "k = Kernel.__new__(Kernel); k.token_rows = {'layout': 'time', 'count': 'num_householder'}",
    "B, T, H, n, d = 2, 3, 2, 3, 4",
    "x = torch.arange(B * T * H * n * d, dtype=torch.float64).reshape(B, T, H, n * d)",
    "g = torch.arange(B * T * H * n, dtype=torch.float64).reshape(B, T, H, n)",
    "kx, kg = to_kernel_rows(k, x, n, False), to_kernel_rows(k, g, n, True)",
    "assert list(kx.shape) == [B, T * n, H, d] and list(kg.shape) == [B, T * n, H]",
    "ok = all(torch.equal(kx[b, t * n + j, h], x[b, t, h, j * d:(j + 1) * d]) and kg[b, t * n + j, h] == g[b, t, h, j]",
    "         for b in range(B) for t in range(T) for h in range(H) for j in range(n))",
    "assert ok and torch.equal(from_kernel_rows(k, kx, n, False), x) and torch.equal(from_kernel_rows(k, kg, n, True), g)",
    "assert to_kernel_rows(k, x, None, False) is x and rows_shape(k, [B, T, H, n * d], n, False) == [B, T * n, H, d]",
    "print('ok')",
  ].join("\n");
  const p = Bun.spawnSync({ cmd: [process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3", "-c", script], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString() + p.stdout.toString().trim()).toBe("ok");
}, 60_000);
