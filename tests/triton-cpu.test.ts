/**
 * Triton kernels on a CPU never judged as garbage (docs/spec/py-backend.md#triton-cpu,
 * #implausible): the kernel host's interpreter support computes bf16 Triton arithmetic as torch does
 * (tests/py-kernels/triton_bf16_probe.py, run where NLC_FLA_PYTHON names a Python with Triton; the
 * interpreter without the support is the planted failure), a result far outside any plausible range
 * says what is likely wrong, and interpreted kernels get their own time limit.
 */
import { expect, test } from "bun:test";
import { ROOT } from "../paths.ts";
import { IMPLAUSIBLE, farthest, withPlausibility } from "../conformance/kernel/python/plausible.ts";
import { INTERPRETED_TIMEOUT_S, kernelTimeoutMs, mayRunTriton } from "../conformance/kernel/python/session.ts";
import type { Compared } from "../oracle/kernel-judge.ts";
import { adoptEnvironment, environment } from "../environment.ts";

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import torch, triton"], stdout: "pipe", stderr: "pipe" });
const noTriton = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import torch and triton` : null;
if (noTriton !== null) console.error(`tests/triton-cpu.test.ts: the interpreter probe is skipped: ${noTriton}`);

test.skipIf(noTriton !== null)("bf16 Triton arithmetic in the interpreter: garbage without the support, torch's values bit for bit with it; loop variables are tensors; a builtin under another name runs; atomic bf16 refused", () => {
  const p = Bun.spawnSync({ cmd: [PY!, "tests/py-kernels/triton_bf16_probe.py"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode === 0 ? "" : p.stderr.toString().slice(-2000)).toBe("");
  const { before, after } = JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!) as
    Record<"before" | "after", { rel: Record<string, number | null>; loop: boolean | string; gather: boolean | string; atomic_refused: string | null }>;
  const ops = ["add", "mul", "sub", "dot", "where_gt", "cast", "cumsum", "sum_max"];
  // Triton 3.8's interpreter: integer arithmetic on the bit patterns (NaN or far off), a truncating cast
  for (const op of ops) expect(before.rel[op] === null || before.rel[op]! > 1e-3).toBe(true);
  expect(String(before.loop)).toContain("'int' object has no attribute 'to'");
  for (const op of ops) expect([op, after.rel[op]]).toEqual([op, 0]);
  expect(after.loop).toBe(true);
  // a builtin the kernel's module binds under its own name (fla's `gather = tl.gather`)
  expect(String(before.gather)).toContain("Did you forget to add @triton.jit");
  expect(after.gather).toBe(true);
  // what the support does not cover is refused with the reason, not run on bit patterns
  expect(before.atomic_refused).toContain("Unsupported data type"); // Triton's own words, no reason
  expect(after.atomic_refused).toContain("atomic bf16 read-modify-writes on raw bit patterns");
}, 300_000);

const item = (name: string, kernel: number[], ref: number[]): Compared => ({ name, group: "out", seq: 0, kernel, ref64: ref, ref32: ref });

test("a failure far outside any plausible range says what is likely wrong; an ordinary failure is left as it is", () => {
  const fail = { ok: false, message: "y (sequence 0): max |kernel - ref64| = ..." };
  const garbage = [item("y", [3e12, 0.5], [0.7, 0.5])];
  expect(farthest(garbage)!.ratio).toBeGreaterThan(IMPLAUSIBLE);
  const interpreted = withPlausibility(fail, garbage, true);
  expect(interpreted.message).toContain("far outside any plausible range (y is off by 3.0e+12 times its largest reference value");
  expect(interpreted.message).toContain("Triton's interpreter");
  expect(withPlausibility(fail, garbage, false).message).toContain("a dtype or layout other than the declared one");
  // a slip of the kernel's arithmetic (here 2x the value) is an ordinary failure
  expect(withPlausibility(fail, [item("y", [1.4, 0.5], [0.7, 0.5])], true)).toEqual(fail);
  // a pass is never annotated
  const pass = { ok: true };
  expect(withPlausibility(pass, garbage, true)).toEqual(pass);
});

test("an interpreted kernel's request limit is INTERPRETED_TIMEOUT_S unless NLC_PY_KERNEL_TIMEOUT says otherwise", () => {
  const saved = environment();
  try {
    adoptEnvironment({ ...saved, NLC_PY_KERNEL_TIMEOUT: undefined });
    expect(kernelTimeoutMs(false)).toBe(60_000);
    expect(kernelTimeoutMs(true)).toBe(INTERPRETED_TIMEOUT_S * 1000);
    adoptEnvironment({ ...saved, NLC_PY_KERNEL_TIMEOUT: "30" });
    expect(kernelTimeoutMs(true)).toBe(30_000);
  } finally {
    adoptEnvironment(saved);
  }
});

test("a module that may run Triton kernels is known before it loads: its load and its child get the interpreted limit", () => {
  expect(mayRunTriton({ module: "examples/py-kernels/fla_real.py" })).toBe(true);
  expect(mayRunTriton({ module: "tests/py-kernels/configurations_planted.py" })).toBe(true);
  expect(mayRunTriton({ module: "examples/py-kernels/naive_delta.py" })).toBe(false);
  expect(mayRunTriton({ module: "mypkg.kernels" })).toBe(true); // a package is not read: the generous limit
});
