/**
 * Judging a kernel case (docs/spec/fixtures.md#kernel-cases) the way C5 judges a kernel it runs
 * itself (docs/spec/precision.md): per (b, h) sequence, ref64 and the plain reference at the
 * fixture's declared precision run on the fixture's inputs; every expected tensor must lie within
 * 2 · max|plain − ref64| + floor of ref64 (the floor per accumulate dtype) and pass the bias test.
 * The fixture's values are the kernel's: where they came from (another language, a GPU, a bf16
 * kernel) does not matter.
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { KernelFixture, KernelTensor } from "../../cases/fixtures/kernel-load.ts";
import { DEFAULT_KERNEL_CHUNKS } from "../../cases/kernel-batch.ts";
import { unpackState, unpackTokens } from "../../cases/kernel-layout.ts";
import { ShapeTally, withShapes } from "../../cases/kernel-shapes.ts";
import { comparedItems, emptySeq, entries, kernelGradKeys, tensorName } from "../../cases/kernel-tensors.ts";
import { plainRuns, plainYardstickSeq, runPlain, runRef64 } from "../../oracle/plain-reference.ts";
import type { PairCase, SeqTensors } from "../../oracle/kernel-case.ts";
import type { InnerInputs, State } from "../../src/rules/types.ts";
import { Tensor } from "../../src/tensor.ts";
import { flashCompare, withLedger } from "../../oracle/kernel-judge.ts";

/** Sequence n = b·H + h of an ABI per-token tensor [B, T, H, w] as [T, w] (gates: [T]; w is n·d for a tokenRows input). */
function tokenSeq(fx: KernelFixture, t: KernelTensor, n: number): Float64Array {
  const w = t.shape.length === 3 ? 1 : t.shape[3]!;
  return unpackTokens(t.data, { B: fx.B, T: fx.cfg.seq_len, H: fx.H }, w, n, new Float64Array(fx.cfg.seq_len * w));
}

/** Sequence n's block of an ABI state tensor [B, H, ...]. */
const stateSeq = (fx: KernelFixture, t: KernelTensor, n: number): Float64Array => unpackState(t.data, fx.B * fx.H, n);

/** The reference's case for sequence n: inputs [T, d] / [T], the state, dy and d(final state) (absent = zero). */
function pairCaseOf(fx: KernelFixture, n: number): PairCase {
  const { d, seq_len: T } = fx.cfg;
  const inputs: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.inputs)) {
    inputs[name] = new Tensor("f64", t.shape.length === 3 ? [T] : [T, t.shape[3]!], tokenSeq(fx, t, n));
  }
  // The reference pair's inputs always carry x; only Trellis reads it, and it is in Trellis' ABI.
  if (!fx.frozen && inputs.x === undefined) inputs.x = new Tensor("f64", [T, d]);
  const shapes = fx.decl.stateShapes(fx.cfg);
  const state: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.state)) state[name] = new Tensor("f64", shapes[name]!, stateSeq(fx, t, n));
  const dy = fx.dy === null ? new Tensor("f64", [T, d]) : new Tensor("f64", [T, d], tokenSeq(fx, fx.dy, n));
  let dFinal: State | undefined;
  if (!fx.frozen && Object.keys(fx.dstate).length > 0) {
    const rec: Record<string, Tensor> = {};
    for (const name of fx.abi.state) {
      const t = fx.dstate[name];
      rec[name] = t === undefined ? new Tensor("f64", shapes[name]!) : new Tensor("f64", shapes[name]!, stateSeq(fx, t, n));
    }
    dFinal = rec;
  }
  return { inputs: inputs as unknown as InnerInputs, state, dy, ...(dFinal ? { dFinal } : {}) };
}

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

export function replayKernelFixture(fx: KernelFixture): CaseOutcome {
  const kernel: SeqTensors[] = [], r64: SeqTensors[] = [], plain: SeqTensors[] = [];
  for (let n = 0; n < fx.B * fx.H; n++) {
    const want = expectedOf(fx, n);
    if (entries(want).length === 0) break;
    const c = pairCaseOf(fx, n);
    const ref = runRef64(fx.decl, fx.frozen, c, fx.cfg);
    kernel.push(want);
    r64.push(ref);
    plain.push(plainYardstickSeq(fx.precision.accumulate, ref, (order) => runPlain(fx.decl, fx.frozen, c, fx.cfg, fx.precision, order), plainRuns(fx.decl)));
  }
  // the loader admits only names of the rule's ABI; a gradient the reference leaves absent is zero by the math
  const items = comparedItems(kernel, r64, plain, fx.frozen, "abi", false);
  if (items.length === 0) return { ok: false, vacuous: true, message: "the fixture has no expected values" };
  const exercised = new Set<string>();
  const p = fx.precision;
  // the shapes the fixture covers (docs/spec/conformance.md#shapes); a fixture declares no chunk size: the smallest default
  const tally = new ShapeTally();
  tally.add({ B: fx.B, T: fx.cfg.seq_len, H: fx.H, d: fx.cfg.d }, Math.min(...DEFAULT_KERNEL_CHUNKS));
  const judged = flashCompare(items, exercised, `the kernel of ${fx.id} (${p.storage}/${p.state}/${p.accumulate})`, p, { layout: { B: fx.B, H: fx.H, T: fx.cfg.seq_len } });
  // one case is the whole check: its power and signatures are the check's
  const { status: _, ...r } = withShapes(withLedger({ ...judged, status: judged.ok ? "pass" : "fail" }, exercised), tally);
  if (!r.ok) return r;
  const names = [...new Set(items.map((i) => i.name))];
  const never = names.filter((x) => !exercised.has(x));
  return {
    ...r,
    message: `${names.length} tensors over ${fx.B * fx.H} sequences within the ${p.storage}/${p.state}/${p.accumulate} bound, no bias` +
      (never.length > 0 ? `; never above the vacuity floor: ${never.join(", ")}` : ""),
  };
}
