/**
 * flash-linear-attention's simple GLA, GLA, linear-attention and RWKV-6 kernels
 * (examples/py-kernels/fla_linear_attention.py), judged as they ship, by declaration only
 * (docs/spec/py-backend.md#fla-linear-attention), and the plants of fla_linear_attention_planted.py,
 * each of which must fail naming the tensor it gets wrong: recurrent (373 s in Triton's interpreter
 * on 2 shared cores) and chunked (720 s there), ten kernels each. Runs when NLC_FLA_PYTHON names a Python with `fla-core`, torch
 * and triton (a CPU build runs the Triton kernels in Triton's interpreter), skipped with the reason
 * otherwise. CI does not install fla.
 */
import { expect, test } from "bun:test";
import type { CheckResult } from "../harness/check.ts";
import { expectStatus, pyRun } from "./py-run.ts";

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null
  : Bun.spawnSync({ cmd: [PY, "-c", "import fla.ops.simple_gla, fla.ops.gla, fla.ops.linear_attn, torch, triton"], stdout: "pipe", stderr: "pipe" });
const reason = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with fla-core, torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import fla, torch and triton: ${probe!.stderr.toString().trim().split("\n").at(-1)}` : null;
if (reason !== null) console.error(`tests/fla-linear-attention.test.ts: skipped: ${reason}`);

const FLA = (k: string) => `py:examples/py-kernels/fla_linear_attention.py:${k}`;
const PLANTED = (k: string) => `py:examples/py-kernels/fla_linear_attention_planted.py:${k}`;
const ENV = { NLC_TORCH_PYTHON: PY ?? "", NLC_PY_KERNEL_TIMEOUT: process.env.NLC_PY_KERNEL_TIMEOUT ?? "900", NLC_KERNEL_CONFIGS: "first" };

/** fla's kernel -> the rule it is declared as (every one has a backward, judged). */
const RECURRENT = {
  fused_recurrent_simple_gla: "hebbian", fused_recurrent_gla: "gla", fused_recurrent_linear_attn: "hebbian",
  fused_recurrent_simple_gla_gamma: "hebbian", fused_recurrent_rwkv6: "rwkv6",
} as const;
const CHUNKED = { chunk_simple_gla: "hebbian", chunk_gla: "gla", chunk_linear_attn: "hebbian", chunk_simple_gla_gamma: "hebbian", chunk_rwkv6: "rwkv6" } as const;

/**
 * A plant -> its rule and the tensors it must fail on, forward and backward: [the kernel's name as
 * the message gives it, ours as details.tensors keys it].
 */
interface Plant { readonly rule: string; readonly forward: readonly [string, string]; readonly backward: readonly [string, string] }
const Y = ["o [y]", "y"] as const;
const RECURRENT_PLANTS: Record<string, Plant> = {
  // the decay one token late: the gate's own gradient is the most wrong
  simple_gla_decay_late: { rule: "hebbian", forward: Y, backward: ["dg [dalpha]", "dalpha"] },
  gla_reversed_channels: { rule: "gla", forward: Y, backward: ["dgk [dalpha]", "dalpha"] },
  // the initial state read transposed: what reads M_0 is wrong (dk and dv are not: the writes do not read it)
  linear_attn_state_transposed: { rule: "hebbian", forward: Y, backward: ["dinitial_state [dM (initial state)]", "dM (initial state)"] },
  // per-head inputs (their own gradients are not compared): another head's decay, the bonus on reversed channels
  simple_gla_gamma_other_head: { rule: "hebbian", forward: Y, backward: ["dq", "dq"] },
  rwkv6_bonus_reversed: { rule: "rwkv6", forward: Y, backward: ["dk", "dk"] },
};
const CHUNKED_PLANTS: Record<string, Plant> = {
  chunk_simple_gla_decay_late: RECURRENT_PLANTS.simple_gla_decay_late!,
  chunk_gla_reversed_channels: { rule: "gla", forward: Y, backward: ["dg [dalpha]", "dalpha"] },
  chunk_linear_attn_state_transposed: RECURRENT_PLANTS.linear_attn_state_transposed!,
  chunk_simple_gla_gamma_other_head: RECURRENT_PLANTS.simple_gla_gamma_other_head!,
  chunk_rwkv6_bonus_reversed: RECURRENT_PLANTS.rwkv6_bonus_reversed!,
};

/** A failed check that names `kernelName` and whose tensor `ours` is over its bound. */
function expectFailNaming(r: CheckResult, [kernelName, ours]: readonly [string, string]): void {
  expectStatus(r, "fail");
  expect(r.message).toContain(kernelName);
  const t = (r.details?.tensors as Record<string, { err: number; bound: number }> | undefined)?.[ours];
  expect(t !== undefined && t.err > t.bound ? "over its bound" : `${ours}: ${JSON.stringify(t)}`).toBe("over its bound");
}

const recurrent = pyRun(() => [...Object.keys(RECURRENT).map(FLA), ...Object.keys(RECURRENT_PLANTS).map(PLANTED)], ENV, 1);
const chunked = pyRun(() => [...Object.keys(CHUNKED).map(FLA), ...Object.keys(CHUNKED_PLANTS).map(PLANTED)], ENV, 1);

/**
 * fla's findings (docs/spec/py-backend.md#fla-linear-attention, each with its repro under repros/fla/):
 * kernel -> the phase that fails, with the tensor named; the other phase passes. Asserted so that a
 * change in fla is seen.
 */
const FINDINGS: Record<string, { phase: string; tensor: string; text: string }> = {
  // the final state's gradient dropped (rwkv6_recurrent_dht_dropped.py): dw, dk, dv, dM0 off; dq exact
  fused_recurrent_rwkv6: { phase: "backward", tensor: "dw [dalpha]", text: "(kernel 0, ref64" },
  // NaN in the final state when the last chunk is partial and the decay strong (simple_gla_gamma_nan_final_state.py)
  chunk_simple_gla_gamma: { phase: "forward", tensor: "final_state [state M]", text: "is NaN where the reference is" },
};

function judged(run: ReturnType<typeof pyRun>, good: Record<string, string>, plants: Record<string, Plant>): void {
  for (const [k, rule] of Object.entries(good)) {
    for (const kind of ["forward", "backward"]) {
      const finding = FINDINGS[k];
      if (finding?.phase !== kind) {
        expectStatus(run.get(FLA(k), rule, kind), "pass");
        continue;
      }
      const r = run.get(FLA(k), rule, kind);
      expectStatus(r, "fail");
      expect(r.message).toContain(finding.tensor);
      expect(r.message).toContain(finding.text);
    }
  }
  for (const [k, p] of Object.entries(plants)) {
    expectFailNaming(run.get(PLANTED(k), p.rule, "forward"), p.forward);
    expectFailNaming(run.get(PLANTED(k), p.rule, "backward"), p.backward);
  }
}

test.skipIf(reason !== null)("fla's recurrent simple GLA (per token and per head), GLA, linear attention and RWKV-6 pass by declaration alone, forward and backward, but for the backward of RWKV-6, which drops dht; each plant fails naming its tensor", () => {
  judged(recurrent, RECURRENT, RECURRENT_PLANTS);
}, 3_600_000);

test.skipIf(reason !== null)("fla's chunked simple GLA (per token and per head), GLA, linear attention and RWKV-6 pass by declaration alone, forward and backward, but for the NaN final state of simple GLA per head; each plant fails naming its tensor", () => {
  judged(chunked, CHUNKED, CHUNKED_PLANTS);
}, 7_200_000);
