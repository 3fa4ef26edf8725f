/**
 * flash-linear-attention's GDN2, gated Oja, TTT-Linear and Titans-linear ops
 * (examples/py-kernels/fla_gdn2_oja.py, fla_ttt.py), judged as they ship
 * (docs/spec/py-backend.md#fla-ttt), and the plants of fla_gdn2_oja_ttt_planted.py, each of which
 * must fail naming the tensor. Runs when NLC_FLA_PYTHON names a Python with `fla-core`, torch and
 * triton (a CPU build runs the Triton kernels in Triton's interpreter), skipped with the reason
 * otherwise. CI does not install fla. The recurrent kernels and fla's PyTorch Titans take minutes
 * on 2 shared cores; the chunked Triton kernels (NLC_FLA_CHUNKED=1) far longer.
 */
import { expect, test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import fla.ops.gdn2, fla.ops.gated_oja_rule, fla.ops.ttt, fla.ops.titans, torch, triton"], stdout: "pipe", stderr: "pipe" });
const reason = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with fla-core, torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import fla, torch and triton: ${probe!.stderr.toString().trim().split("\n").at(-1)}` : null;
if (reason !== null) console.error(`tests/fla-gdn2-oja-ttt.test.ts: skipped: ${reason}`);
const chunkedReason = reason ?? (process.env.NLC_FLA_CHUNKED === "1" ? null : "NLC_FLA_CHUNKED is not 1 (fla's chunked Triton kernels in the interpreter take hours on a small CPU)");
if (reason === null && chunkedReason !== null) console.error(`tests/fla-gdn2-oja-ttt.test.ts: chunked kernels skipped: ${chunkedReason}`);

const GDN2_OJA = (k: string) => `py:examples/py-kernels/fla_gdn2_oja.py:${k}`;
const TTT = (k: string) => `py:examples/py-kernels/fla_ttt.py:${k}`;
const PLANTED = (k: string) => `py:examples/py-kernels/fla_gdn2_oja_ttt_planted.py:${k}`;
const ENV = { NLC_TORCH_PYTHON: PY ?? "", NLC_PY_KERNEL_TIMEOUT: process.env.NLC_PY_KERNEL_TIMEOUT ?? "900", NLC_KERNEL_CONFIGS: "first" };

/** The failing check's message names the tensor (fla's name and ours, docs/spec/py-backend.md#contract). */
function expectFailNaming(r: ReturnType<ReturnType<typeof pyRun>["get"]>, tensors: string[]): void {
  expectStatus(r, "fail");
  const message = r.message ?? "";
  expect(tensors.some((t) => message.includes(t)) ? "named" : message).toBe("named");
}

// the recurrent kernels (Triton's interpreter) and fla's PyTorch Titans-linear: a few minutes
const recurrent = pyRun(() => [
  ...["fused_recurrent_gdn2", "fused_recurrent_gdn2_all_dims", "fused_recurrent_gdn2_varlen", "fused_recurrent_gated_oja_rule"].map(GDN2_OJA),
  ...["titans_linear", "chunk_titans_linear", "chunk_ttt_linear_ref"].map(TTT),
  ...["gdn2_reversed_channels", "oja_late_decay"].map(PLANTED),
], ENV, 1);

test.skipIf(reason !== null)("fla's recurrent GDN2 and gated Oja pass by declaration alone (forward-only: fla has no backward for them)", () => {
  for (const [k, rule] of [["fused_recurrent_gdn2", "gdn2"], ["fused_recurrent_gated_oja_rule", "gated_oja"]] as const) {
    expectStatus(recurrent.get(GDN2_OJA(k), rule, "forward"), "pass");
    const bw = recurrent.get(GDN2_OJA(k), rule, "backward");
    expectStatus(bw, "skip");
    expect(bw.message).toContain("forward-only");
  }
}, 3_600_000);

test.skipIf(reason !== null)("fla's recurrent GDN2 at every head dimension reads g past its end (repros/fla/gdn2_unmasked_gate_load.py)", () => {
  const r = recurrent.get(GDN2_OJA("fused_recurrent_gdn2_all_dims"), "gdn2", "forward");
  expectStatus(r, "fail");
  expect(r.message).toContain("input alpha (keyword 'g')");
  expect(r.message).toContain("read past its end");
}, 3_600_000);

test.skipIf(reason !== null)("fla's recurrent GDN2 with packed batches leaves an empty sequence's final state unwritten (repros/fla/gdn2_empty_sequence_final_state.py)", () => {
  const r = recurrent.get(GDN2_OJA("fused_recurrent_gdn2_varlen"), "gdn2", "forward");
  expectStatus(r, "fail");
  expect(r.message).toContain("left final_state [state M]");
  expect(r.message).toContain("unwritten");
}, 3_600_000);

test.skipIf(reason !== null)("fla's Titans-linear fails as shipped, forward and backward, naming y and the memory (repros/fla/titans_linear_inner_step.py)", () => {
  for (const k of ["titans_linear", "chunk_titans_linear"]) {
    expectFailNaming(recurrent.get(TTT(k), "titans_linear", "forward"), ["o [y]", "final_state [state M]", "final state S [state S]"]);
    expectFailNaming(recurrent.get(TTT(k), "titans_linear", "backward"), ["dk", "dq", "dv", "dalpha", "dtheta", "deta", "(initial state)"]);
  }
}, 3_600_000);

test.skipIf(reason !== null)("fla's chunk_ttt_linear_ref writes into its f32 q (repros/fla/ttt_ref_scales_q_in_place.py)", () => {
  for (const kind of ["forward", "backward"]) {
    const r = recurrent.get(TTT("chunk_ttt_linear_ref"), "ttt_linear", kind);
    expectStatus(r, "fail");
    expect(r.message).toContain("wrote into input q");
  }
}, 3_600_000);

test.skipIf(reason !== null)("planted: GDN2's decay on reversed channels and gated Oja's decay one token late fail, naming y or the final state", () => {
  expectFailNaming(recurrent.get(PLANTED("gdn2_reversed_channels"), "gdn2", "forward"), ["o [y]", "final_state [state M]"]);
  expectFailNaming(recurrent.get(PLANTED("oja_late_decay"), "gated_oja", "forward"), ["o [y]", "final_state [state M]"]);
}, 3_600_000);

// fla's chunked Triton kernels in the interpreter, each kernel's first configuration
const chunked = pyRun(() => [
  ...["chunk_gdn2", "chunk_gated_oja_rule"].map(GDN2_OJA), ...["chunk_ttt_linear", "fused_chunk_ttt_linear"].map(TTT),
  ...["chunk_gdn2_reversed_channels", "chunk_oja_late_decay", "fused_chunk_ttt_linear_stale", "chunk_ttt_linear_ln_w_detached"].map(PLANTED),
  // chunk_gdn2's first forward request (the call and its probes) ran past 900 s in the interpreter on 2 shared cores
], { ...ENV, NLC_PY_KERNEL_TIMEOUT: process.env.NLC_PY_KERNEL_TIMEOUT ?? "3600" }, 1);

test.skipIf(chunkedReason !== null)("fla's chunked GDN2 and TTT-Linear (at the rule's chunk size, 1) pass forward and backward; gated Oja forward", () => {
  for (const [b, rule] of [[GDN2_OJA("chunk_gdn2"), "gdn2"], [TTT("chunk_ttt_linear"), "ttt_linear"], [TTT("fused_chunk_ttt_linear"), "ttt_linear"]] as const) {
    for (const kind of ["forward", "backward"]) expectStatus(chunked.get(b, rule, kind), "pass");
  }
  expectStatus(chunked.get(GDN2_OJA("chunk_gated_oja_rule"), "gated_oja", "forward"), "pass");
}, 14_400_000);

test.skipIf(chunkedReason !== null)("fla's chunked gated Oja backward is NaN in dv where the decay is saturated (repros/fla/gated_oja_saturated_backward.py)", () => {
  const r = chunked.get(GDN2_OJA("chunk_gated_oja_rule"), "gated_oja", "backward");
  expectStatus(r, "fail");
  expect(r.message).toContain("saturated gates");
  expect(r.message).toMatch(/dv \(sequence \d+\) at .* is NaN/);
}, 14_400_000);

test.skipIf(chunkedReason !== null)("planted in the chunked kernels: each fails naming the tensor", () => {
  for (const kind of ["forward", "backward"]) {
    expectStatus(chunked.get(PLANTED("chunk_gdn2_reversed_channels"), "gdn2", kind), "fail");
    expectStatus(chunked.get(PLANTED("chunk_oja_late_decay"), "gated_oja", kind), "fail");
  }
  expectFailNaming(chunked.get(PLANTED("fused_chunk_ttt_linear_stale"), "ttt_linear", "forward"), ["o [y]", "final_state [state M]", "final_state_bias [state M_b]"]);
  // γ detached: fla's forward, every term of dγ dropped
  expectStatus(chunked.get(PLANTED("chunk_ttt_linear_ln_w_detached"), "ttt_linear", "forward"), "pass");
  expectFailNaming(chunked.get(PLANTED("chunk_ttt_linear_ln_w_detached"), "ttt_linear", "backward"), ["dln_w"]);
}, 14_400_000);
