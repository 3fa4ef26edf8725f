/**
 * flash-linear-attention's own kernels (examples/py-kernels/fla_real.py), judged as they ship, by
 * declaration only: run when NLC_FLA_PYTHON names a Python with `fla-core` and torch (a CPU build
 * runs the Triton kernels in Triton's interpreter), skipped with the reason otherwise. CI does not
 * install fla; this file is how a machine that has it confirms the README's claim. On a CPU the
 * chunked kernels run through the kernel host's interpreter support (docs/spec/py-backend.md#triton-cpu),
 * under every autotune configuration (#configurations): minutes.
 */
import { expect, test } from "bun:test";
import { expectStatus, pyRun } from "./py-run.ts";

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import fla, torch, triton"], stdout: "pipe", stderr: "pipe" });
const reason = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with fla-core, torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import fla, torch and triton: ${probe!.stderr.toString().trim().split("\n").at(-1)}` : null;
if (reason !== null) console.error(`tests/fla-real.test.ts: skipped: ${reason}`);

const FLA = (k: string) => `py:examples/py-kernels/fla_real.py:${k}`;
const KERNELS = { fused_recurrent_delta_rule: "delta", fused_recurrent_gated_delta_rule: "gated_delta" } as const;

test.skipIf(reason !== null)("fla's recurrent DeltaNet and Gated DeltaNet kernels pass by declaration alone (f32, quick profile)", () => {
  const { get } = pyRun(() => Object.keys(KERNELS).map(FLA), { NLC_TORCH_PYTHON: PY ?? "" }, 0);
  expectStatus(get(FLA("fused_recurrent_delta_rule"), "delta", "forward"), "pass");
  expectStatus(get(FLA("fused_recurrent_delta_rule"), "delta", "backward"), "pass");
  expectStatus(get(FLA("fused_recurrent_gated_delta_rule"), "gated_delta", "forward"), "pass");
  // fla's recurrent Gated DeltaNet has no backward: declared forward-only, its backward is a skip saying so
  const noBackward = get(FLA("fused_recurrent_gated_delta_rule"), "gated_delta", "backward");
  expectStatus(noBackward, "skip");
  expect(noBackward.message).toContain("forward-only");
}, 1_800_000);

const chunked = pyRun(() => [FLA("chunk_delta_rule_bf16_stored")], { NLC_TORCH_PYTHON: PY ?? "", NLC_KERNEL_CONFIGS: "all" }, 0);

test.skipIf(reason !== null)("fla's chunked bf16 DeltaNet runs where Triton is interpreted and passes declared as storing its intermediates, under every configuration", () => {
  for (const kind of ["forward", "backward"]) {
    const r = chunked.get(FLA("chunk_delta_rule_bf16_stored"), "delta", kind);
    expectStatus(r, "pass");
    const c = r.details?.configurations as { judged: { name: string; cases: number }[]; not_judged: string[] } | undefined;
    // on a GPU (no interpreter) the same holds; the interpreter also runs each distinct computation once
    expect(c?.judged.length ?? 0).toBeGreaterThan(4);
    expect(c!.judged.some((j) => j.name.startsWith("chunk_fwd_kernel_o#"))).toBe(true);
    expect(c!.not_judged).toEqual([]);
  }
}, 1_800_000);
