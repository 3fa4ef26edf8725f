/**
 * The hazard probes on py: kernels (docs/spec/hazards.md), each proven by a planted kernel of
 * tests/py-kernels/hazards_planted.py that computes the right values and breaks one promise: a
 * read one element past the end of its gate at K = 5, a write into an input, a write past an
 * input's end, two runs that differ. A kernel whose write into an input is bitwise the same when
 * repeated is named as writing it in forward and backward, not as nondeterministic: the host's
 * ignored-input probe works on copies of the request's tensors and reports its own calls' writes.
 * Each fails by name; the same sums in a random order pass
 * when the kernel declares a tolerance, which the report states. The report's summary of the
 * probes counts the runs made (ffi/hazards.ts ProbeTally), so a session that skipped the second run
 * would say "not run". Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { HAZARD_PLAN, ProbeTally } from "../ffi/hazards.ts";
import { cli, expectStatus, pyRun } from "./py-run.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";

const FILE = "tests/py-kernels/hazards_planted.py";
const NAIVE = "py:examples/py-kernels/naive_delta.py:naive_delta";
const hasTorch = probeTorchSync().available;
const k = (name: string) => `py:${FILE}:${name}`;
const run = pyRun(() => [...["reads_past_gate", "writes_input", "scratch_input", "writes_past_end", "nondeterministic", "nondeterministic_declared", "nondeterministic_dbeta"].map(k), NAIVE]);

test.skipIf(!hasTorch)("py: a kernel reading one element past the end of its gate at K = 5 fails, naming the input", () => {
  for (const kind of ["forward", "backward"]) {
    const r = run.get(k("reads_past_gate"), "delta", kind);
    expectStatus(r, "fail");
    expect(r.message).toContain("input alpha (keyword 'forget'): tests/py-kernels/hazards_planted.py:reads_past_gate read past its end");
    expect(r.message).toContain("d=5");
  }
}, 300_000);

test.skipIf(!hasTorch)("py: writes into an input and past its end fail by name; so do two runs that differ", () => {
  for (const kind of ["forward", "backward"]) {
    const w = run.get(k("writes_input"), "delta", kind);
    expectStatus(w, "fail");
    expect(w.message).toContain("wrote into input theta (keyword 'beta')");
    const p = run.get(k("writes_past_end"), "delta", kind);
    expectStatus(p, "fail");
    expect(p.message).toContain("v: tests/py-kernels/hazards_planted.py:writes_past_end wrote past its end (1 guard element(s) after it");
  }
  for (const kind of ["forward", "backward"]) {
    const s = run.get(k("scratch_input"), "delta", kind);
    expectStatus(s, "fail");
    expect(s.message).toContain("scratch_input wrote into input theta (keyword 'beta') (34 of its 34 elements changed by the call");
    expect(s.message).not.toContain("not deterministic");
  }
  const n = run.get(k("nondeterministic"), "delta", "forward");
  expectStatus(n, "fail");
  expect(n.message).toContain("is not deterministic: two runs of the same case differ: y differs by up to");
  // a backward's outputs in the kernel's terms (its keyword first, ours in brackets), never the protocol's grads.theta
  expectStatus(run.get(k("nondeterministic_dbeta"), "delta", "forward"), "pass");
  const g = run.get(k("nondeterministic_dbeta"), "delta", "backward");
  expectStatus(g, "fail");
  expect(g.message).toMatch(/is not deterministic: two runs of the same case differ: dbeta \[dtheta\] differs by up to \S+ \(\|dbeta \[dtheta\]\| up to /);
  expect(g.message).not.toContain("grads.");
}, 300_000);

test.skipIf(!hasTorch)("py: a declared tolerance lets two runs differ within it, and the report states it; a correct kernel is bitwise", () => {
  const d = run.get(k("nondeterministic_declared"), "delta", "forward");
  expectStatus(d, "pass");
  const det = (d.details as { probes: { determinism: { tolerance: number; max_rel_seen: number } } }).probes.determinism;
  expect(det.tolerance).toBe(1e-5);
  expect(det.max_rel_seen).toBeGreaterThan(0);
  expect(det.max_rel_seen).toBeLessThan(1e-5);
  for (const kind of ["forward", "backward"]) {
    const r = run.get(NAIVE, "delta", kind);
    expectStatus(r, "pass");
    // tallied from the runs the session made: every call the probes passed was run twice
    const probes = (r.details as { probes: { guard_bytes: number; determinism: unknown; calls: number; rerun: number } }).probes;
    expect(probes).toEqual({ guard_bytes: 256, determinism: "bitwise", calls: probes.calls, rerun: probes.calls });
    expect(probes.calls).toBeGreaterThan(r.runs - 1);
    // a kernel that reaches no autotuned kernel says so: none to judge, not "not looked at" (docs/spec/py-backend.md#configurations)
    expect((r.details as { configurations: unknown }).configurations).toEqual({ autotuned: "no autotuned kernel was reached: the default is the one configuration" });
  }
}, 300_000);

test.skipIf(!hasTorch)("py: the read past the gate's end fails at every run seed (the declared K = 5 case)", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-hz-"));
  try {
    for (const seed of [2, 3, 4]) {
      const report = join(dir, `r${seed}.json`);
      const p = cli(["--backend", k("reads_past_gate"), "--filter", "C5/py-reads_past_gate/delta/forward", "--profile", "quick", "--seed", String(seed), "--report", report]);
      expect(p.exitCode).toBe(1);
      const r = (JSON.parse(readFileSync(report, "utf8")).checks as CheckResult[]).find((c) => c.id.endsWith("/delta/forward"))!;
      expectStatus(r, "fail");
      expect(r.message).toContain("read past its end");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 300_000);

test("the probes' summary says what was run: calls run once only are not a determinism check", () => {
  const once = new ProbeTally(HAZARD_PLAN, null);
  once.add({ runs: 1 });
  once.add({ runs: 1 });
  expect(once.summary()).toEqual({ guard_bytes: 256, determinism: "not run", calls: 2, rerun: 0 });
  const some = new ProbeTally(HAZARD_PLAN, null);
  some.add({ runs: 2 });
  some.add({ runs: 1 });
  expect(some.summary()).toEqual({ guard_bytes: 256, determinism: "bitwise", calls: 2, rerun: 1 });
  const declared = new ProbeTally(HAZARD_PLAN, 1e-5);
  declared.add({ runs: 2, rerunMaxRel: 3e-7 });
  expect(declared.summary()).toEqual({ guard_bytes: 256, determinism: { tolerance: 1e-5, max_rel_seen: 3e-7 }, calls: 1, rerun: 1 });
  expect(new ProbeTally(HAZARD_PLAN, null).summary().determinism).toBe("not run");
});
