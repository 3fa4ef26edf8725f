/**
 * The declaration vocabulary for kernels as flash-linear-attention ships them, end to end through
 * `--backend py:` (docs/spec/py-backend.md#gate-forms, #constants, #input-dtypes): a KDA kernel in
 * plain PyTorch with fla's signature and switches (examples/py-kernels/kda_torch.py) passes forward
 * and backward under each declaration (the raw gates' gradients through the forms' exact maps), and
 * each planted kernel or wrong declaration (kda_torch_planted.py) fails or is an error naming the
 * key. One suite run with every backend. Skipped without python3 + torch.
 */
import { expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { expectStatus, expectUnavailable, pyRun } from "./py-run.ts";

const torch = probeTorchSync();
const OK = (k: string) => `py:examples/py-kernels/kda_torch.py:${k}`;
const BAD = (k: string) => `py:examples/py-kernels/kda_torch_planted.py:${k}`;
const GOOD = ["kda_log_gate", "kda_gate_in_kernel", "kda_neg_eigval", "kda_v_first", "kda_bf16_f32_gates"];
const PLANTS = ["kda_head0_params", "kda_sigmoid_as_neg_eigval", "kda_v_first_undeclared"];

const run = pyRun(() => [...GOOD.map(OK), ...[...PLANTS, "kda_form_and_log_gate", "kda_constant_collides", "kda_input_dtype_typo"].map(BAD)]);

test.skipIf(!torch.available)("fla's switches declared: log-space gate, in-kernel softplus gate and sigmoid beta, beta in (0, 2), value-first state, bf16 with f32 gates pass forward and backward", () => {
  for (const k of GOOD) for (const phase of ["forward", "backward"]) expectStatus(run.get(OK(k), "kda", phase), "pass");
}, 600_000);

test.skipIf(!torch.available)("planted: another head's A_log and dt_bias, beta declared in (0, 2) but computed in (0, 1), the value-first constant not passed: each fails forward and backward", () => {
  for (const k of PLANTS) for (const phase of ["forward", "backward"]) expectStatus(run.get(BAD(k), "kda", phase), "fail");
}, 600_000);

test.skipIf(!torch.available)("a gate with two parametrisations and a dtype for an input that does not exist are load errors naming them; a constant that names a keyword the host passes is an error naming it", () => {
  expectUnavailable(run.get(BAD("kda_form_and_log_gate"), "kda", "forward"), "a gate has one parametrisation");
  expectUnavailable(run.get(BAD("kda_input_dtype_typo"), "kda", "forward"), "'alpah' is not an input name; did you mean 'alpha'?");
  const r = run.get(BAD("kda_constant_collides"), "kda", "forward");
  expectStatus(r, "error");
  expect(r.message).toContain("nlc['constants']['scale']");
}, 600_000);
