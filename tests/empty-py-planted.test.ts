/**
 * Empty and length-1 sequences in packed batches (docs/spec/py-backend.md#edges): the declared
 * empty-sequence case (lengths [0, C + 1, 0, 1, 0], equal offsets at the start, middle and end of
 * cu_seqlens) on the planted kernels of tests/py-kernels/empty_planted.py, each right on every
 * sequence with tokens: one that drops the empty sequences (the next sequence starts from the wrong
 * initial state) and one that writes the previous sequence's state as an empty sequence's final
 * state fail it by name, forward and backward; one that returns before it stores an empty
 * sequence's final state (allocated with new_empty) is named as leaving it unwritten, forward and
 * backward, not as nondeterministic (docs/spec/hazards.md#unwritten); the same driver without a plant and the example
 * kernels that take cu_seqlens (active and a frozen read) pass. The kernel host accepts equal offsets and still refuses
 * decreasing ones, naming cu_seqlens; the torch reference runs at T = 0 (the final state is the
 * initial state, d(initial state) = d(final state)). Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { defaultPython } from "../oracle/torch-process.ts";
import { ROOT } from "../paths.ts";
import { RULES } from "../src/rules/index.ts";
import { buildPyCase } from "../conformance/kernel/python/canonical-case.ts";
import { EMPTY_LABEL, emptyLengths, pyEmptyExample } from "../conformance/kernel/python/edges.ts";
import { cuSeqlens } from "../cases/kernel-layout.ts";

const FILE = "tests/py-kernels/empty_planted.py";
const hasTorch = probeTorchSync().available;
const k = (name: string) => `py:${FILE}:${name}`;
// the correct kernels that take cu_seqlens, by rule: the chunked DeltaNet of fla_style_ops.py, the packed naive kernel and its frozen read
const EXAMPLES: [string, string][] = [["py:examples/py-kernels/fla_deltanet.py:chunk_delta_rule", "delta"],
  ["py:tests/py-kernels/varlen_leak_planted.py:packed", "delta"], ["py:tests/py-kernels/varlen_leak_planted.py:packed_read", "delta.frozen"]];
const run = pyRun(() => [...["skips_empty", "empty_final_from_previous", "final_unwritten", "hand_off"].map(k), ...EXAMPLES.map(([b]) => b)]);

test("the declared empty-sequence case: equal offsets at cu_seqlens' start, middle and end, a length-1 sequence, every state random", () => {
  expect(cuSeqlens(emptyLengths(16))).toEqual([0, 0, 17, 17, 18, 18]);
  const decl = RULES.find((d) => d.key === "delta")!;
  const c = buildPyCase(decl, pyEmptyExample(decl, 16) as never);
  expect(c.packed?.lengths).toEqual([0, 17, 0, 1, 0]);
  expect(c.seqs.map((s) => s.T)).toEqual([0, 0, 17, 17, 0, 0, 1, 1, 0, 0]);
  // a zero initial state would hide a kernel that writes zeros as an empty sequence's final state
  for (const s of c.seqs) expect(Math.max(...Array.from(s.st64.M!.data, Math.abs))).toBeGreaterThan(0.01);
  expect(EMPTY_LABEL).toContain("empty sequence");
});

test.skipIf(!hasTorch)("the kernel host accepts equal offsets and refuses decreasing ones, naming cu_seqlens; the torch reference at T = 0 hands the state through", () => {
  const script = [
    "import types, torch",
    "from nlc_torch.kernel_calls import packed_offsets",
    "from nlc_torch.kernel_declaration import KernelError",
    "from nlc_torch.ref_inner import run_inner",
    "k = types.SimpleNamespace(varlen='cu_seqlens', spec='py:x:y', device='cpu')",
    "q = torch.zeros(1, 3, 2, 4)",
    "st = {'M': torch.zeros(5, 2, 4, 4)}",
    "print(packed_offsets(k, [0, 0, 2, 2, 3, 3], q, st).tolist())",
    "try:\n    packed_offsets(k, [0, 2, 1, 3, 3, 3], q, st)\nexcept KernelError as e:\n    print(e)",
    "M0, dM = torch.randn(2, 4, 4, dtype=torch.float64), torch.randn(2, 4, 4, dtype=torch.float64)",
    "z = lambda *s: torch.zeros(2, 0, *s, dtype=torch.float64)",
    "r = run_inner('delta', {'d': 4, 'seq_len': 0}, 'f64', {'k': z(4), 'v': z(4), 'q': z(4), 'alpha': z(), 'theta': z()}, {'M': M0}, z(4), {'M': dM})",
    "print(list(r['y'].shape), bool(torch.equal(r['state.M'], M0)), bool(torch.equal(r['grads.state.M'], dM)), list(r['grads.k'].shape))",
    "f = run_inner('delta.frozen', {'d': 4, 'seq_len': 0}, 'f64', {'q': z(4)}, {'M': M0}, z(4), {})",
    "print(list(f['y'].shape), bool(torch.equal(f['state.M'], M0)), bool(torch.equal(f['grads.state.M'], torch.zeros_like(M0))))",
  ].join("\n");
  const p = Bun.spawnSync({ cmd: [defaultPython({}), "-c", script], env: { ...process.env, PYTHONPATH: join(ROOT, "python") }, stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  const [ok, refused, ref, frozen] = p.stdout.toString().trim().split("\n");
  expect(ok).toBe("[0, 0, 2, 2, 3, 3]");
  expect(refused).toBe("cu_seqlens: expected offsets non-decreasing from 0 to T = 3 with B = 1, got [0, 2, 1, 3, 3, 3] (B = 1)");
  expect(ref).toBe("[2, 0, 4] True True [2, 0, 4]");
  // a frozen read at T = 0 reads nothing: the state unchanged, its gradient zero
  expect(frozen).toBe("[2, 0, 4] True True");
}, 120_000);

test.skipIf(!hasTorch)("py: a kernel that mishandles an empty sequence fails the declared empty-sequence case by name; the correct ones pass", () => {
  for (const name of ["skips_empty", "empty_final_from_previous"]) {
    for (const kind of ["forward", "backward"]) {
      const r = run.get(k(name), "delta", kind);
      expectStatus(r, "fail");
      expect(r.message).toContain("case empty sequences and a length-1 sequence: packed: {sequences: 5, lengths: [0, 17, 0, 1, 0]}");
      // the kernel's names first (the fla declaration names its final state final_state), ours in brackets
      expect(r.message).toContain(kind === "forward" ? "final_state [state M]" : "dM (initial state)");
    }
  }
  for (const [b, rule] of [[k("hand_off"), "delta"], ...EXAMPLES]) {
    for (const kind of ["forward", "backward"]) {
      const r = run.get(b!, rule!, kind);
      expectStatus(r, "pass");
      expect((r.details as { shapes: { packed?: { lengths: number[] } } }).shapes.packed?.lengths).toContain(0);
    }
  }
}, 600_000);

test.skipIf(!hasTorch)("py: a final state the kernel allocates and never stores for an empty sequence is named unwritten, forward and backward", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("final_unwritten"), "delta", kind);
    expectStatus(r, "fail");
    // packed sequences 0, 2 and 4 are empty: with H = 2, sequences n = i·H + h 0, 1, 4, 5, 8 and 9
    expect(r.message).toContain("final_unwritten left final_state [state M][seq 0, 1, 4, 5, 8, 9] unwritten (an output the kernel allocates and does not store: 96 of its 160 elements");
    expect(r.message).not.toContain("not deterministic");
    expect(r.message).not.toContain("read past");
    expect((r.details as { hazards: { kind: string }[] }).hazards.map((h) => h.kind)).toEqual(["unwritten"]);
  }
}, 600_000);
