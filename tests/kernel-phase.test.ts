/**
 * The one phase case (cases/kernel-phase.ts): whatever answers (at once or later), the kernel's
 * tensors are judged against the f64 reference computed from the one sequence record and the
 * yardstick passed in. Planted: a kernel whose y is off by 1 % on one sequence fails, naming y and
 * that sequence; a hazard the probes saw is the verdict before any comparison (no reference is run);
 * a backend that answers later gets the same verdict as its promise; the reference of every sequence
 * is that sequence's (planted: every sequence read as the first fails).
 */
import { expect, test } from "bun:test";
import { sampleOf } from "../cases/inner-case.ts";
import { caseArb } from "../cases/kernel-batch.ts";
import type { KernelRun } from "../cases/kernel-backend.ts";
import { phaseVerdict, phaseVerdictNow, references64 } from "../cases/kernel-phase.ts";
import { mapSeq } from "../cases/kernel-tensors.ts";
import { sequencesOf } from "../conformance/kernel/native/abi-case.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import { F32_STORE_F64_ACC } from "../oracle/kernel-judge.ts";
import { referenceRun } from "../oracle/kernel-reference.ts";
import { RULES } from "../src/rules/index.ts";

const decl = RULES.find((r) => r.key === "delta")!;
const k = sampleOf(caseArb(decl, false, "default", "abi"), 5, 20).find((x) => x.B * x.H > 1 && !x.dyNull && !x.dFinalNull)!;
const { seqs, cfg, shape } = sequencesOf(decl, k, false);
const reference = { phases: "forward" as const };
// each sequence through the reference directly (what references64 must give)
const r64 = seqs.map((s) => referenceRun(decl, false, { inputs: s.in64, state: s.st64, dy: s.dy64, dFinal: s.dFinal64 }, cfg, "forward"));
/** The kernel's outputs: ref64 in f32, `off` scaling sequence 1's y. */
const kernelOf = (off: number): SeqTensors[] => r64.map((r, n) => mapSeq(r, (a, key) => Float32Array.from(a as ArrayLike<number>, (v) => (n === 1 && key.part === "y" ? v * off : v))) as SeqTensors);
const yardstick = (r: readonly SeqTensors[]): SeqTensors[] => r.map((x) => mapSeq(x, (a) => Float32Array.from(a as ArrayLike<number>)) as SeqTensors);
const common = {
  decl, frozen: false, seqs, cfg, reference, precision: F32_STORE_F64_ACC, style: "abi" as const, all: true, yardstick,
  options: { layout: { B: shape.B, H: shape.H, T: shape.T, C: k.C } },
};
const answer = (perSeq: SeqTensors[]): KernelRun => ({ perSeq, hazards: [], who: "the planted kernel" });
/** The case on a backend that answers at once with `perSeq`. */
const now = (perSeq: SeqTensors[]) => ({ ...common, exercised: new Set<string>(), run: () => answer(perSeq) });

test("a kernel that returns the reference in f32 passes; y off by 1 % on sequence 1 fails, naming y", () => {
  const good = phaseVerdictNow(now(kernelOf(1)));
  expect(good.ok).toBe(true);
  const bad = phaseVerdictNow(now(kernelOf(1.01)));
  expect(bad.ok).toBe(false);
  expect(bad.worst?.tensor).toBe("y[seq 1]");
});

test("references64: the f64 reference of each sequence of the one record, at its own length", () => {
  expect(JSON.stringify(references64({ decl, frozen: false, seqs, cfg, reference }))).toBe(JSON.stringify(r64));
});

test("a hazard is the verdict, before any reference or yardstick runs", () => {
  let yardstickRan = false;
  const v = phaseVerdictNow({
    ...now(kernelOf(1)),
    run: () => ({ perSeq: kernelOf(1), hazards: [{ kind: "wrote-input", tensor: "k", elements: 1, of: 4 }], who: "the planted kernel" }),
    yardstick: (r) => ((yardstickRan = true), r),
  });
  expect(v.ok).toBe(false);
  expect(v.details?.hazards).toBeDefined();
  expect(yardstickRan).toBe(false);
});

test("a backend that answers later gets the same verdict, as a promise", async () => {
  const atOnce = phaseVerdict(now(kernelOf(1.01)));
  const later = phaseVerdict({ ...now(kernelOf(1.01)), run: async () => answer(kernelOf(1.01)) });
  expect(later).toBeInstanceOf(Promise);
  expect(JSON.stringify(await later)).toBe(JSON.stringify(atOnce));
});
