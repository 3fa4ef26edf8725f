/**
 * Every configuration of a kernel judged (docs/spec/py-backend.md#configurations;
 * conformance/kernel/python/configurations.ts): a kernel wrong in exactly one of its configurations fails
 * naming it, passes when only the default is judged (NLC_KERNEL_CONFIGS=first), and that limit is
 * said in the message and the details. Planted: tests/py-kernels/configurations_planted.py.
 * The Triton variant (an autotuned Triton kernel of our own) runs where NLC_FLA_PYTHON names a
 * Python with Triton (in its interpreter on a CPU); CI has none and skips it with the reason.
 */
import { expect, test } from "bun:test";
import type { CheckResult } from "../harness/check.ts";
import { ConfigTally, configLimit, NO_AUTOTUNED } from "../harness/configurations.ts";
import { cli, expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { pyKernelChecks } from "../conformance/kernel/python/checks.ts";
import { runCheck } from "../harness/run.ts";
import { environment } from "../environment.ts";

const hasTorch = probeTorchSync().available;
const FILE = "tests/py-kernels/configurations_planted.py";
const K = (k: string) => `py:${FILE}:${k}`;
const configurations = (r: CheckResult) => r.details?.configurations as
  { limit: string; judged: { name: string; cases: number; ms: number }[]; not_judged: string[] } | undefined;

test("NLC_KERNEL_CONFIGS: all by default, first on request, anything else an error naming it", () => {
  expect(configLimit({})).toBe("all");
  expect(configLimit({ NLC_KERNEL_CONFIGS: "all" })).toBe("all");
  expect(configLimit({ NLC_KERNEL_CONFIGS: "first" })).toBe("first");
  expect(() => configLimit({ NLC_KERNEL_CONFIGS: "some" })).toThrow(/NLC_KERNEL_CONFIGS="some"/);
  expect(() => configLimit({ NLC_FLA_FIRST_CONFIG: "1" })).toThrow(/NLC_FLA_FIRST_CONFIG is replaced by NLC_KERNEL_CONFIGS=first/);
  expect(configLimit({ NLC_FLA_FIRST_CONFIG: "1", NLC_KERNEL_CONFIGS: "first" })).toBe("first");
  const t = new ConfigTally("first");
  t.add("fused", 1);
  t.reached(["two-pass", "split-k"], 0);
  expect(t.note()).toContain("1 of 3 configurations judged");
  // calls that reached no autotuned kernel say so (none to judge), calls that said nothing do not (not looked at)
  const none = new ConfigTally("all");
  none.add("default", 1);
  expect(none.details()).toBeUndefined();
  none.reached([], 0, 0);
  expect(none.details()).toEqual({ autotuned: NO_AUTOTUNED });
  expect(NO_AUTOTUNED).toStartWith("no autotuned kernel was reached");
  none.reached([], 0, 2);
  expect(none.details()).toBeUndefined();
});

test("an NLC_KERNEL_CONFIGS the suite does not know is a usage error (exit 2) naming it, before any check runs", () => {
  const p = cli(["--backend", K("declared"), "--filter", "C5/py-", "--profile", "quick"], { NLC_KERNEL_CONFIGS: "every" });
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain('NLC_KERNEL_CONFIGS="every": expected "all"');
});

const all = pyRun(() => [K("declared_planted"), K("declared")], { NLC_KERNEL_CONFIGS: "all" });
const first = pyRun(() => [K("declared_planted")], { NLC_KERNEL_CONFIGS: "first" }, 0);

test.skipIf(!hasTorch)("a kernel wrong in one declared configuration fails naming it; its correct twin passes with every configuration named", () => {
  for (const kind of ["forward", "backward"]) {
    const bad = all.get(K("declared_planted"), "delta", kind);
    expectStatus(bad, "fail");
    expect(bad.message).toStartWith("configuration two-pass: ");
    const good = all.get(K("declared"), "delta", kind);
    expectStatus(good, "pass");
    const c = configurations(good)!;
    expect(c.limit).toBe("all");
    expect(c.judged.map((j) => j.name)).toEqual(["fused", "two-pass", "split-k"]);
    // every configuration saw every case
    expect(new Set(c.judged.map((j) => j.cases)).size).toBe(1);
    expect(c.not_judged).toEqual([]);
  }
}, 600_000);

test.skipIf(!hasTorch)("judged in its first configuration only, the same kernel passes, and the check says what it left out", () => {
  for (const kind of ["forward", "backward"]) {
    const r = first.get(K("declared_planted"), "delta", kind);
    expectStatus(r, "pass");
    expect(r.message).toContain("1 of 3 configurations judged (NLC_KERNEL_CONFIGS=first");
    const c = configurations(r)!;
    expect(c.limit).toBe("first");
    expect(c.judged.map((j) => j.name)).toEqual(["fused"]);
    expect(c.not_judged).toEqual(["two-pass", "split-k"]);
  }
}, 600_000);

const PY = process.env.NLC_FLA_PYTHON;
const probe = PY === undefined ? null : Bun.spawnSync({ cmd: [PY, "-c", "import torch, triton"], stdout: "pipe", stderr: "pipe" });
const noTriton = PY === undefined ? "NLC_FLA_PYTHON is not set (a Python with torch and triton)"
  : probe!.exitCode !== 0 ? `${PY} cannot import torch and triton` : null;
if (noTriton !== null) console.error(`tests/configurations.test.ts: the Triton case is skipped: ${noTriton}`);
const triton = pyRun(() => [K("triton_planted")], { NLC_TORCH_PYTHON: PY ?? "", NLC_KERNEL_CONFIGS: "all" });
const tritonFirst = pyRun(() => [K("triton_planted")], { NLC_TORCH_PYTHON: PY ?? "", NLC_KERNEL_CONFIGS: "first" }, 0);

test.skipIf(noTriton !== null)("an autotuned Triton kernel wrong in one configuration (BLOCK=32) fails naming it, passes judged in its first only", () => {
  const bad = triton.get(K("triton_planted"), "delta", "forward");
  expectStatus(bad, "fail");
  expect(bad.message).toStartWith("configuration scaled_copy#2 (BLOCK=32, num_warps=2, num_stages=3): ");
  const c = configurations(bad)!;
  // in the interpreter, configurations that differ in launch options only are one computation
  expect(c.judged.map((j) => j.name)).toEqual(["first of each autotuned kernel", "scaled_copy#2 (BLOCK=32, num_warps=2, num_stages=3)"]);
  const ok = tritonFirst.get(K("triton_planted"), "delta", "forward");
  expectStatus(ok, "pass");
  expect(ok.message).toContain("1 of 3 configurations judged (NLC_KERNEL_CONFIGS=first");
  expect(configurations(ok)!.not_judged).toEqual(["scaled_copy#2 (BLOCK=32, num_warps=2, num_stages=3)", "scaled_copy#4 (BLOCK=64, num_warps=2, num_stages=3)"]);
}, 1_800_000);

test.skipIf(!hasTorch)("the child judges the limit of the run's settings (conformance/catalogue-settings.ts), not one the record would give it", () => {
  expect(environment().NLC_KERNEL_CONFIGS).toBeUndefined();
  const def = pyKernelChecks([K("declared_planted")], "first").find((d) => d.id === "C5/py-declared_planted/delta/forward")!;
  const r = runCheck(def, { seed: 1, profile: "quick", selected: new Set([def.id]) });
  expectStatus(r, "pass");
  expect(r.message).toContain("1 of 3 configurations judged (NLC_KERNEL_CONFIGS=first");
}, 600_000);
