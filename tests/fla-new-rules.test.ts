/**
 * flash-linear-attention's kernels for KDA, Comba and DPLR (examples/py-kernels/fla_new_rules.py),
 * judged as they ship, by declaration only (docs/spec/py-backend.md#fla-new-rules), and the
 * plants of fla_new_rules_planted.py, each of which must fail: recurrent (a few minutes in Triton's
 * interpreter) and chunked, with IPLR and RWKV-7 as DPLR (about
 * an hour there, on 2 shared cores). Runs when NLC_FLA_PYTHON names a Python with `fla-core`, torch
 * and triton (a CPU build runs the Triton kernels in Triton's interpreter), skipped with the reason
 * otherwise. CI does not install fla.
 */
import { expect, test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import fla.ops.kda, fla.ops.comba, torch, triton"], stdout: "pipe", stderr: "pipe" });
const reason = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with fla-core, torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import fla, torch and triton: ${probe!.stderr.toString().trim().split("\n").at(-1)}` : null;
if (reason !== null) console.error(`tests/fla-new-rules.test.ts: skipped: ${reason}`);

const FLA = (k: string) => `py:examples/py-kernels/fla_new_rules.py:${k}`;
const PLANTED = (k: string) => `py:examples/py-kernels/fla_new_rules_planted.py:${k}`;
/** fla's kernel (or its declared variant) -> the rule it implements. */
const GOOD = {
  fused_recurrent_kda: "kda", fused_recurrent_comba: "comba", fused_recurrent_dplr_delta_rule: "dplr",
  fused_recurrent_kda_gate_in_kernel: "kda", fused_recurrent_kda_neg_eigval: "kda", fused_recurrent_kda_v_first: "kda",
  fused_recurrent_gated_delta_rule_gk: "kda",
} as const;
const PLANTS = { kda_reversed_channels: "kda", comba_reads_k: "comba", dplr_decayed_read: "dplr" } as const;

// a kernel call in Triton's interpreter takes seconds, and ten hosts import fla at once on a small machine
const run = pyRun(() => [...Object.keys(GOOD).map(FLA), FLA("fused_recurrent_kda_varlen"), ...Object.keys(PLANTS).map(PLANTED)],
  { NLC_TORCH_PYTHON: PY ?? "", NLC_PY_KERNEL_TIMEOUT: process.env.NLC_PY_KERNEL_TIMEOUT ?? "900" }, 1);

test.skipIf(reason !== null)("fla's recurrent KDA, Comba and DPLR pass by declaration alone (f32, quick profile), the in-kernel gate forms and the value-first state included", () => {
  for (const [k, rule] of Object.entries(GOOD)) {
    expectStatus(run.get(FLA(k), rule, "forward"), "pass");
    // fla's recurrent kernels for these rules have no backward: declared forward-only, the backward is a skip saying so
    const bw = run.get(FLA(k), rule, "backward");
    expectStatus(bw, "skip");
    expect(bw.message).toContain("forward-only");
  }
}, 3_600_000);

test.skipIf(reason !== null)("fla's recurrent KDA with packed batches fails at the empty-sequence case, naming the final state it leaves unwritten", () => {
  // repros/fla/kda_empty_sequence_final_state.py; docs/spec/py-backend.md#fla-new-rules-gpu
  const r = run.get(FLA("fused_recurrent_kda_varlen"), "kda", "forward");
  expectStatus(r, "fail");
  expect(r.message).toMatch(/left final_state .* unwritten/);
}, 3_600_000);

test.skipIf(reason !== null)("planted: KDA's decays on reversed channels and DPLR's low-rank read from the decayed state fail; Comba's correction read with k is an error naming the p it ignores", () => {
  expectStatus(run.get(PLANTED("kda_reversed_channels"), "kda", "forward"), "fail");
  expectStatus(run.get(PLANTED("dplr_decayed_read"), "dplr", "forward"), "fail");
  // the host's probe redraws p and sees y and the final state bitwise unchanged (docs/spec/py-backend.md#absent)
  const comba = run.get(PLANTED("comba_reads_k"), "comba", "forward");
  expectStatus(comba, "error");
  expect(comba.message).toContain("accepts the input p (keyword 'p') but ignores it");
}, 3_600_000);

/**
 * fla's chunked kernels (and the recurrent IPLR and RWKV-7) -> [rule, has a backward]: those judged
 * on a CPU (docs/spec/py-backend.md#fla-new-rules has the numbers). chunk_kda_bf16 (declared without
 * its bf16 intermediates) fails there, as the section says; the ones not yet judged there for time run
 * in ffi/gpu-checks.sh's fla step.
 */
const CHUNKED = {
  chunk_kda: ["kda", true], chunk_comba: ["comba", true], chunk_dplr_delta_rule: ["dplr", true], chunk_kda_bf16_stored: ["kda", true],
  chunk_comba_bf16_stored: ["comba", true], chunk_rwkv7: ["dplr", true], chunk_kda_gate_in_kernel: ["kda", true],
  chunk_iplr_delta_rule: ["dplr", false], fused_recurrent_iplr_delta_rule: ["dplr", true], fused_recurrent_rwkv7: ["dplr", false],
} as const;
const CHUNKED_PLANTS = { chunk_kda_reversed_channels: "kda", chunk_comba_reads_k: "comba", chunk_dplr_decayed_read: "dplr" } as const;

// the chunked kernels in Triton's interpreter, with the project's bf16 and loop-variable support
// (docs/spec/py-backend.md#triton-cpu), each kernel's first configuration: about an hour on 2 shared cores
const chunked = pyRun(() => [...Object.keys(CHUNKED).map(FLA), ...Object.keys(CHUNKED_PLANTS).map(PLANTED)],
  { NLC_TORCH_PYTHON: PY ?? "", NLC_PY_KERNEL_TIMEOUT: process.env.NLC_PY_KERNEL_TIMEOUT ?? "900", NLC_KERNEL_CONFIGS: "first" }, 1);

test.skipIf(reason !== null)("fla's chunked KDA, Comba and DPLR, IPLR and RWKV-7 pass by declaration alone, forward and backward where fla has one", () => {
  for (const [k, [rule, backward]] of Object.entries(CHUNKED)) {
    expectStatus(chunked.get(FLA(k), rule, "forward"), "pass");
    const bw = chunked.get(FLA(k), rule, "backward");
    expectStatus(bw, backward ? "pass" : "skip");
    if (!backward) expect(bw.message).toContain("forward-only");
  }
}, 7_200_000);

test.skipIf(reason !== null)("planted in the chunked kernels: KDA's reversed channels and DPLR's decayed read fail forward and backward; Comba's correction read with k is an error naming p", () => {
  for (const kind of ["forward", "backward"]) {
    expectStatus(chunked.get(PLANTED("chunk_kda_reversed_channels"), "kda", kind), "fail");
    expectStatus(chunked.get(PLANTED("chunk_dplr_decayed_read"), "dplr", kind), "fail");
  }
  const comba = chunked.get(PLANTED("chunk_comba_reads_k"), "comba", "forward");
  expectStatus(comba, "error");
  expect(comba.message).toContain("accepts the input p (keyword 'p') but ignores it");
}, 7_200_000);
