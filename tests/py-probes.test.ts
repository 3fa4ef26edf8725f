/**
 * The kernel host's ignored-input probe (docs/spec/py-backend.md#absent, docs/spec/hazards.md#inputs),
 * called directly: it runs on copies of the request's tensors, so a kernel that writes an input
 * leaves the request's own untouched and the write is recorded as the probe saw it; and its error
 * for an input the kernel takes and ignores names both causes (the op does not read it: declare it
 * absent; or the kernel should read it and does not). An output the host found unwritten ends the
 * probes at the judged run: the guard-attribution runs never blame an input for it. Skipped without
 * PyTorch (the probes' plan runs without it).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { defaultPython } from "../oracle/torch-process.ts";
import { ROOT } from "../paths.ts";
import { HAZARD_PLAN, hazardVerdict, probeRuns, type GuardedRun, type Hazard } from "../ffi/hazards.ts";

const hasTorch = probeTorchSync().available;

function python(lines: string[]): string[] {
  const p = Bun.spawnSync({ cmd: [defaultPython({}), "-c", lines.join("\n")], cwd: ROOT, env: { ...process.env, PYTHONPATH: join(ROOT, "python") }, stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode === 0 ? "" : p.stderr.toString()).toBe("");
  return p.stdout.toString().trim().split("\n");
}

const SETUP = [
  "import torch",
  "from nlc_torch.kernel_declaration import Kernel, KernelError",
  "from nlc_torch.kernel_probes import probe_ignored",
  "g = torch.Generator().manual_seed(3)",
  "r = lambda *s: torch.rand(*s, generator=g) * 0.5 + 0.25",
  "inputs = {n: r(1, 3, 2, 4) for n in ('k', 'v', 'q')}",
  "inputs.update({n: r(1, 3, 2) for n in ('alpha', 'theta')})",
  "state = {'M': r(1, 2, 4, 4)}",
];

test.skipIf(!hasTorch)("the probe works on copies: a kernel writing an input leaves the request's tensors as they were, and the write is recorded", () => {
  const out = python([...SETUP,
    "kern = Kernel('tests/py-kernels/hazards_planted.py:scratch_input', None)",
    "before = {n: t.clone() for n, t in inputs.items()}",
    "writes = []",
    "print(probe_ignored(kern, 'delta', {'d': 4}, inputs, state, None, writes))",
    "print(all(torch.equal(before[n], inputs[n]) for n in inputs))",
    "print(writes)",
  ]);
  expect(out[0]).toBe("True");
  expect(out[1]).toBe("True");
  expect(out[2]).toBe("[{'kind': 'wrote-input', 'tensor': 'theta', 'keyword': 'beta', 'elements': 6, 'of': 6}]");
}, 120_000);

test.skipIf(!hasTorch)("an input the kernel takes and ignores: the error names both causes", () => {
  const out = python([...SETUP,
    "kern = Kernel('examples/py-kernels/fla_deltanet_planted.py:deltanet_ignores_alpha', None)",
    "try:\n    probe_ignored(kern, 'delta', {'d': 4}, inputs, state, None)\nexcept KernelError as e:\n    print(e)",
  ]);
  expect(out[0]).toContain("accepts the input alpha (keyword 'alpha') but ignores it: y and the final state are bitwise unchanged when alpha is redrawn");
  expect(out[0]).toContain("Either the rule's operation truly does not read alpha: declare it in nlc['absent']");
  expect(out[0]).toContain("or the kernel should read it and does not (it reads another input where alpha belongs, or none): a bug in the kernel");
}, 120_000);

test("an unwritten output ends the probes at the judged run: no rerun, no input blamed", () => {
  const unwritten: Hazard = { kind: "unwritten", tensor: "final state [state M]", elements: 32, of: 160, seqs: [0, 1] };
  // the judged run says what the host found; a later run, were one made, differs (garbage would)
  const runs: GuardedRun[] = [
    { outputs: [["y", [1, 2]], ["final state [state M]", [Number.NaN, 3]]], writes: [unwritten], guarded: ["k", "v"] },
    { outputs: [["y", [1, 2]], ["final state [state M]", [5, 3]]], writes: [], guarded: ["k", "v"] },
  ];
  const steps = probeRuns(HAZARD_PLAN, null);
  let next = steps.next(), made = 0;
  while (!next.done) next = steps.next(runs[Math.min(made++, runs.length - 1)]!);
  expect(made).toBe(1);
  expect(next.value.hazards).toEqual([unwritten]);
  expect(hazardVerdict(next.value.hazards, "m:f")!.message).toBe(
    "m:f left final state [state M][seq 0, 1] unwritten (an output the kernel allocates and does not store: 32 of its 160 elements " +
    "still hold the fill of the memory it allocated; docs/spec/hazards.md#unwritten)");
});

test.skipIf(!hasTorch)("nlc['outputs'] names what the kernel returns, for messages; a name that is not y or one of its rules' states is an error naming it", () => {
  const out = python([
    "import sys; sys.path.insert(0, 'examples/py-kernels')",
    "from nlc_torch.kernel_declaration import Kernel, KernelError",
    "from fla_deltanet import DELTANET, fused_recurrent_delta_rule",
    "print(Kernel('examples/py-kernels/fla_deltanet.py:fused_recurrent_delta_rule', None).conventions()['outputs'])",
    "import fla_deltanet",
    "fla_deltanet.typo = fla_deltanet.declared(lambda q, k, v, beta, **kw: None, **{**DELTANET, 'outputs': {'y': 'o', 'S': 'final_state'}})",
    "try:\n    Kernel('fla_deltanet:typo', None)\nexcept KernelError as e:\n    print(e)",
  ]);
  expect(out[0]).toBe("{'y': 'o', 'M': 'final_state'}");
  expect(out[1]).toBe("fla_deltanet:typo.nlc['outputs']: expected {'y': <name>, <state>: <name>} with the states of delta (M), " +
    "e.g. {'y': 'o', 'M': 'final_state'}, got {'y': 'o', 'S': 'final_state'}");
}, 120_000);
