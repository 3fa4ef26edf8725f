/**
 * Judging a kernel case (docs/spec/fixtures.md#kernel-cases) the way C5 judges a kernel it runs
 * itself (docs/spec/precision.md), by the one phase case (cases/kernel-phase.ts): the fixture is the
 * backend, its run the recorded tensors; per (b, h) sequence, ref64 (oracle/kernel-reference.ts) and
 * the plain reference at the fixture's declared precision run on the fixture's inputs; every
 * expected tensor must lie within 2 · max|plain − ref64| + floor of ref64 (the floor per accumulate
 * dtype) and pass the bias test. The fixture's values are the kernel's: where they came from
 * (another language, a GPU, a bf16 kernel) does not matter.
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { KernelFixture, KernelTensor } from "../../cases/fixtures/kernel-load.ts";
import { DEFAULT_KERNEL_CHUNKS } from "../../cases/kernel-batch.ts";
import { unpackState, unpackTokens } from "../../cases/kernel-layout.ts";
import { kernelYardstick, phaseVerdictNow, type PhaseCase } from "../../cases/kernel-phase.ts";
import type { KernelSeq } from "../../cases/kernel-seq.ts";
import { ShapeTally, withShapes } from "../../cases/kernel-shapes.ts";
import { emptySeq, entries, kernelGradKeys, tensorName } from "../../cases/kernel-tensors.ts";
import type { SeqTensors } from "../../oracle/kernel-case.ts";
import type { InnerInputs, State } from "../../src/rules/types.ts";
import { cast, Tensor } from "../../src/tensor.ts";
import { withLedger } from "../../oracle/kernel-judge.ts";

/** Sequence n = b·H + h of an ABI per-token tensor [B, T, H, w] as [T, w] (gates: [T]; w is n·d for a tokenRows input). */
function tokenSeq(fx: KernelFixture, t: KernelTensor, n: number): Float64Array {
  const w = t.shape.length === 3 ? 1 : t.shape[3]!;
  return unpackTokens(t.data, { B: fx.B, T: fx.cfg.seq_len, H: fx.H }, w, n, new Float64Array(fx.cfg.seq_len * w));
}

/** Sequence n's block of an ABI state tensor [B, H, ...]. */
const stateSeq = (fx: KernelFixture, t: KernelTensor, n: number): Float64Array => unpackState(t.data, fx.B * fx.H, n);

const f32 = (rec: Readonly<Record<string, Tensor>>): Record<string, Tensor> =>
  Object.fromEntries(Object.entries(rec).map(([name, t]) => [name, cast(t, "f32")]));

/**
 * Sequence n as a kernel case holds it (cases/kernel-seq.ts, the abi form): the inputs [T, d] / [T],
 * the state, dy and d(final state) (absent = zero) in f64 for ref64, and the same values in f32 for
 * the plain reference (the loader admits only values of the declared dtypes, so the copies are exact).
 */
function seqOf(fx: KernelFixture, n: number): KernelSeq<"abi"> {
  const { d, seq_len: T } = fx.cfg;
  const in64: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.inputs)) {
    in64[name] = new Tensor("f64", t.shape.length === 3 ? [T] : [T, t.shape[3]!], tokenSeq(fx, t, n));
  }
  // The reference pair's inputs always carry x; only Trellis reads it, and it is in Trellis' ABI.
  if (!fx.frozen && in64.x === undefined) in64.x = new Tensor("f64", [T, d]);
  const shapes = fx.decl.stateShapes(fx.cfg);
  const st64: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.state)) st64[name] = new Tensor("f64", shapes[name]!, stateSeq(fx, t, n));
  const dy64 = fx.dy === null ? new Tensor("f64", [T, d]) : new Tensor("f64", [T, d], tokenSeq(fx, fx.dy, n));
  const dFinal64: Record<string, Tensor> = {};
  if (givesDFinal(fx)) {
    for (const name of fx.abi.state) {
      const t = fx.dstate[name];
      dFinal64[name] = t === undefined ? new Tensor("f64", shapes[name]!) : new Tensor("f64", shapes[name]!, stateSeq(fx, t, n));
    }
  }
  return {
    T, h: n % fx.H, cfg: fx.cfg, in64: in64 as Record<string, Tensor> & InnerInputs, st64, dy64, dFinal64,
    in32: f32(in64) as unknown as InnerInputs, st32: f32(st64) as State, dy32: cast(dy64, "f32"), dFinal32: f32(dFinal64) as State,
  };
}

/** Whether the fixture gives d(final state) (an active pair's; absent, the backward runs without it). */
const givesDFinal = (fx: KernelFixture): boolean => !fx.frozen && Object.keys(fx.dstate).length > 0;

/** The fixture's expected tensors of sequence n (those it gives). */
function expectedOf(fx: KernelFixture, n: number): SeqTensors<Float64Array> {
  const out = emptySeq<Float64Array>();
  const e = fx.expected;
  if (e.y !== undefined) out.y = tokenSeq(fx, e.y, n);
  for (const [name, t] of Object.entries(e.state ?? {})) out.state[name] = stateSeq(fx, t, n);
  const g = kernelGradKeys(fx.abi, fx.frozen);
  for (const k of g.tokens) {
    const t = e.grads?.[tensorName(k, fx.frozen)];
    if (t !== undefined) out.grads[k.name] = tokenSeq(fx, t, n);
  }
  for (const k of g.states) {
    const t = e.grads?.[tensorName(k, fx.frozen)];
    if (t !== undefined) out.dState0[k.name] = stateSeq(fx, t, n);
  }
  return out;
}

/**
 * The fixture's check: its recorded tensors judged as a backend's answer by the phase case, with the
 * yardstick of a native kernel (the plain reference on the f32 copies); the outcome carries the
 * power ledger and the shapes covered, and a pass names the tensors never above the vacuity floor.
 */
export function replayKernelFixture(fx: KernelFixture): CaseOutcome {
  // the sequences the fixture gives expected values for (the first without any ends them)
  const kernel: SeqTensors[] = [];
  for (let n = 0; n < fx.B * fx.H; n++) {
    const want = expectedOf(fx, n);
    if (entries(want).length === 0) break;
    kernel.push(want);
  }
  const p = fx.precision;
  const who = `the kernel of ${fx.id} (${p.storage}/${p.state}/${p.accumulate})`;
  const exercised = new Set<string>();
  const phase: Omit<PhaseCase, "run" | "yardstick"> & { seqs: KernelSeq<"abi">[] } = {
    decl: fx.decl, frozen: fx.frozen, seqs: kernel.map((_, n) => seqOf(fx, n)), cfg: fx.cfg, precision: p,
    // ref64 and the plain reference in one run of both phases; the fixture's dy and d(final state) as given
    reference: { phases: "both", options: { dFinalNull: !givesDFinal(fx) } },
    // the loader admits only names of the rule's ABI; a gradient the reference leaves absent is zero by the math
    style: "abi", all: false, exercised, who, options: { layout: { B: fx.B, H: fx.H, T: fx.cfg.seq_len } },
  };
  let names: string[] = [];
  const judged = phaseVerdictNow({
    ...phase,
    run: () => ({ perSeq: kernel, hazards: [], who }),
    yardstick: kernelYardstick(phase),
    onItems: (items) => { names = [...new Set(items.map((i) => i.name))]; },
  });
  if (names.length === 0) return { ok: false, vacuous: true, message: "the fixture has no expected values" };
  // the shapes the fixture covers (docs/spec/conformance.md#shapes); a fixture declares no chunk size: the smallest default
  const tally = new ShapeTally();
  tally.add({ B: fx.B, T: fx.cfg.seq_len, H: fx.H, d: fx.cfg.d }, Math.min(...DEFAULT_KERNEL_CHUNKS));
  // one case is the whole check: its power and signatures are the check's
  const { status: _, ...r } = withShapes(withLedger({ ...judged, status: judged.ok ? "pass" : "fail" }, exercised), tally);
  if (!r.ok) return r;
  const never = names.filter((x) => !exercised.has(x));
  return {
    ...r,
    message: `${names.length} tensors over ${fx.B * fx.H} sequences within the ${p.storage}/${p.state}/${p.accumulate} bound, no bias` +
      (never.length > 0 ? `; never above the vacuity floor: ${never.join(", ")}` : ""),
  };
}
