/**
 * The one plan and the one catalogue of the kernel checks (conformance/kernel/plan.ts, checks.ts;
 * docs/spec/kernel-abi.md#backend-kinds): a backend gets the rule checks whose needs it offers, in
 * the table's order, with what its kind's plan style says (subject, spec, tolerance), and nothing
 * tests the kind's name; the catalogue runs each kind's checks as the kind says — one child batch of
 * every selected sibling with their parts, or each where it is called — after the kind's verdict.
 */
import { expect, test } from "bun:test";
import type { CheckDef, DelegatedCheck, DelegateOptions } from "../harness/check.ts";
import { stubResult, type BatchRequest } from "../harness/child-process.ts";
import { checkSeed } from "../harness/replay-command.ts";
import { RULES } from "../src/rules/index.ts";
import { variantKey } from "../src/rules/level.ts";
import type { Capability } from "../cases/kernel-backend.ts";
import { kernelPlan, entryOf, partOf, type ChildEntry, type Part, type PlanStyle, type RuleEntry } from "../conformance/kernel/plan.ts";
import { kernelChecks, type KernelKind } from "../conformance/kernel/checks.ts";
import { NATIVE_STYLE, nativePlanBackend } from "../conformance/kernel/native/plan.ts";
import { PY_STYLE, PY_TOLERANCE, parsePyBackend, pyPlanBackend } from "../conformance/kernel/python/plan.ts";
import { TOLERANCE } from "../conformance/kernel/tolerance.ts";

const VARIANTS = RULES.flatMap((r) => (r.frozen === null ? [[r, false] as const] : [[r, false] as const, [r, true] as const]));
const phaseIds = (slug: string) => VARIANTS.flatMap(([r, f]) => ["forward", "backward"].map((k) => `C5/${slug}/${variantKey(r.key, f)}/${k}`));
const plan = (offers: readonly Capability[], style: PlanStyle = NATIVE_STYLE) => kernelPlan({ name: "x:y", slug: "x-y", offers, style });

test("a backend gets the checks whose needs it offers, in the table's order", () => {
  // the contract alone: forward and backward of every rule variant
  expect(plan(["contract"]).map((e) => e.id)).toEqual(phaseIds("x-y"));
  // a py: kernel: the contract, and its refusal probe once per rule, after the active pair's backward
  const py = pyPlanBackend(parsePyBackend("py:examples/py-kernels/naive_delta.py:naive_delta@nd"));
  const pyIds = kernelPlan(py).map((e) => e.id);
  expect(pyIds).toEqual(VARIANTS.flatMap(([r, f]) => [
    ...phaseIds("py-nd").filter((id) => id.startsWith(`C5/py-nd/${variantKey(r.key, f)}/`)), ...(f ? [] : [`C5/py-nd/${r.key}/contract`]),
  ]));
  // a native library: its entry points too, never the refusal probe, never the emulation's checks
  const cuda = kernelPlan(nativePlanBackend("cuda"));
  expect(cuda.map((e) => e.kind).filter((k, i, a) => a.indexOf(k) === i)).toEqual(["forward", "backward", "checkpoint", "chunks", "workspace", "tape-e2e"]);
  expect(cuda.filter((e) => "frozen" in e && e.frozen).every((e) => e.kind === "forward" || e.kind === "backward")).toBe(true);
  // cpu-emu: the emulation's controls and its self-tests last
  const emu = kernelPlan(nativePlanBackend("cpu-emu"));
  expect(emu.slice(0, 8).map((e) => e.id)).toEqual(["forward", "backward", "checkpoint", "chunks", "workspace", "race", "gpu-blocks", "tape-e2e"].map((k) => `C5/cpu-emu/delta/${k}`));
  expect(emu.slice(-3).map((e) => e.kind)).toEqual(["emu-race-detector", "emu-sync", "emu-thread-mode"]);
  expect(emu.every((e) => e.kind !== "contract")).toBe(true);
  // each rule entry says what it needs, and the backend offers it
  for (const e of [...emu, ...kernelPlan(py)] as RuleEntry[]) if ("needs" in e) expect(["contract", "library", "emulation", "refusal"]).toContain(e.needs);
});

test("what differs by kind is its plan style: subject, spec text, tolerance", () => {
  const [nf] = plan(["contract"]) as RuleEntry[];
  const [pf] = plan(["contract"], PY_STYLE) as RuleEntry[];
  expect(nf!.subject).toEqual({ rule: "delta", frozen: false, backend: "x:y", phase: "forward", dtype: "f32" });
  expect(pf!.subject).toEqual({ rule: "delta", frozen: false, backend: "x:y" });
  expect(nf!.tolerance).toBe(TOLERANCE);
  expect(pf!.tolerance).toBe(PY_TOLERANCE);
  expect(pf!.spec.startsWith("docs/spec/py-backend.md#forward-check; ")).toBe(true);
  expect(nf!.spec).toContain("docs/spec/kernel-abi.md#contract");
  // a style that does not describe a check its backend offers is an error naming both
  expect(() => plan(["contract", "refusal"])).toThrow("the plan style of x:y has no spec text for its contract check");
});

test("a part travels as data and comes back as its entry", () => {
  for (const e of kernelPlan(nativePlanBackend("cpu-emu"))) {
    const p = JSON.parse(JSON.stringify(partOf(e))) as Part;
    expect(entryOf(p)).toEqual(e);
  }
});

/** Every check of `checks`, run as the runner would: selected together, in order. */
function runAll(checks: readonly CheckDef[]) {
  const selected = new Set(checks.map((c) => c.id));
  const opts = (id: string): DelegateOptions => ({ seed: checkSeed(1, id), runSeed: 1, profile: "quick", selected });
  return checks.map((c) => (c as DelegatedCheck).delegate(opts(c.id)));
}

test("the catalogue runs a kind's checks as the kind says: one child batch with the parts, or each here; its verdict first", () => {
  const sent: BatchRequest<Part>[] = [];
  const child: KernelKind = {
    plan: (name) => ({ name, slug: name.replace(":", "-"), offers: ["contract"], style: NATIVE_STYLE }),
    runs: {
      batch: (req) => {
        sent.push(req);
        return new Map(req.checks.map((c) => [c.id, { ...stubResult(c.id, "pass", "ok", 1), runs: 3 }]));
      },
    },
    needs: (name) => ({ child: `kernel ${name}` }),
    replayArgs: (name) => ["--backend", name],
  };
  const checks = kernelChecks(child, ["b:one"]);
  expect(checks.map((c) => c.id)).toEqual(phaseIds("b-one"));
  expect(checks.every((c) => c.kind === "delegated" && c.needs.child === "kernel b:one" && c.replayArgs?.join(" ") === "--backend b:one")).toBe(true);
  const results = runAll(checks);
  expect(results.every((r) => r.status === "pass" && r.runs === 3)).toBe(true);
  // one batch for every selected sibling, each with its part of the plan
  expect(sent.length).toBe(1);
  expect(sent[0]!.checks.map((c) => c.id)).toEqual(checks.map((c) => c.id));
  expect(sent[0]!.checks.map((c) => (c.part as { kind: string }).kind)).toEqual(checks.map((c) => c.id.split("/").at(-1)!));

  const ran: string[] = [], FIRST = "C5/b-two/delta/forward";
  const here: KernelKind = {
    ...child,
    runs: { here: (_, e: ChildEntry) => () => (ran.push(e.id), { status: "pass", runs: 1, seed: 0, path: "" }) },
    replayArgs: () => undefined,
    // a verdict before running: the first rule's checks are skipped and never run
    verdict: (_, seed) => (seed === checkSeed(1, FIRST) ? { status: "skip", runs: 0, seed, path: "", message: "unavailable" } : null),
  };
  const local = kernelChecks(here, ["b:two"]);
  expect(local.every((c) => c.kind === "delegated" && c.replayArgs === undefined)).toBe(true);
  const out = runAll(local);
  expect(out[0]!.status).toBe("skip");
  expect(ran).toEqual(local.slice(1).map((c) => c.id));
});
