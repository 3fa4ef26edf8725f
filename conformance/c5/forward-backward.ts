/**
 * C5 forward and backward cases: the kernel's outputs on a batch of B·H sequences against the
 * TypeScript reference in f64 (ref64) and in f32 (ref32, the bound's yardstick), per tensor and
 * sequence — y and the final state; every input gradient and d(initial state), with dy and
 * d(final state) given or NULL (docs/spec/kernel-abi.md#backward).
 */
import { gradInput, symbolName, type GradName, type RuleAbi, type Shape } from "../../ffi/abi.ts";
import { wireDType, type Arrays, type KernelLib } from "../../ffi/lib.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { zeros } from "../../src/tensor.ts";
import { asStored, batchDy, batchInputs, batchQ, batchState, sequencesOf, type KSpec, type Seq } from "./batch.ts";
import { comparedItems, emptySeq, fromInnerGrads, tokenWidth, unpackState, unpackTokens } from "../../cases/kernel-batch.ts";
import type { Precision } from "../../src/precision.ts";
import { plainRuns, plainYardstickSeq, type SeqTensors } from "../../oracle/plain-reference.ts";
import { F32_STORE_F64_ACC, flashCompare } from "../../oracle/kernel-judge.ts";
import { requireFrozen, requirePair } from "./kernel-lib.ts";
import { chunkFormSymbol } from "../../ffi/abi.ts";
import { hasChunkStartGd } from "../../src/rules/chunk-gd.ts";
import { chunkGdReferenceBackward, chunkGdReferenceForward } from "../../oracle/chunk-gd-reference.ts";
import { judgePair } from "../../oracle/matrix-fast.ts";

/** What a kernel run produced for one sequence. */
export type PerSeq = SeqTensors<Float32Array>;

/**
 * The reference a pair is compared with (docs/spec/kernel-abi.md#chunk-form): the sequential rule,
 * or chunk-start GD at the chunk size the pair declares. An exact chunked pair computes the
 * sequential rule's function and is compared with it.
 */
type RefForm = { gdC: number | null };
const SEQUENTIAL: RefForm = { gdC: null };

/**
 * The form a case compares against, or why the declaration cannot be judged. Frozen reads have no
 * chunk form.
 */
export function refFormOf(decl: RuleDecl, frozen: boolean, lib: KernelLib): RefForm | string {
  if (frozen) return SEQUENTIAL;
  const f = lib.chunkForm(decl.key);
  if (typeof f === "string") return f;
  if (f.kind !== "chunk-start-gd") return SEQUENTIAL;
  if (!hasChunkStartGd(decl)) return `${chunkFormSymbol(decl.key)} declares chunk-start GD, which the reference does not define for '${decl.key}'`;
  return { gdC: f.C };
}

/** The reference's y and final state (frozen: y) of one sequence in one precision. */
function refForward(decl: RuleDecl, frozen: boolean, s: Seq, p: 32 | 64, cfg: RuleConfig, form: RefForm): SeqTensors {
  const inp = p === 64 ? s.in64 : s.in32, st = p === 64 ? s.st64 : s.st32;
  const out = emptySeq<ArrayLike<number>>();
  if (frozen) return { ...out, y: decl.frozen!.forward(inp.q, st, cfg).y.data };
  if (form.gdC !== null) return chunkGdReferenceForward(decl, inp, st, cfg, form.gdC);
  const r = judgePair(decl).forward(inp, st, cfg);
  out.y = r.y.data;
  for (const [n, t] of Object.entries(r.finalState)) out.state[n] = t.data;
  return out;
}

/** The reference's gradients of one sequence (absent = zero, filled in by the comparison). */
function refBackward(decl: RuleDecl, frozen: boolean, s: Seq, p: 32 | 64, cfg: RuleConfig, k: KSpec, form: RefForm): SeqTensors {
  const inp = p === 64 ? s.in64 : s.in32, st = p === 64 ? s.st64 : s.st32;
  const dy0 = p === 64 ? s.dy64 : s.dy32;
  const dy = k.dyNull ? zeros(dy0.dtype, dy0.shape) : dy0;
  const out = emptySeq<ArrayLike<number>>();
  if (frozen) {
    const fz = decl.frozen!;
    const g = fz.backward(fz.forward(inp.q, st, cfg).saved, inp.q, dy, cfg);
    out.grads.q = g.dq.data;
    for (const [n, t] of Object.entries(g.dState)) out.dState0[n] = t.data;
    return out;
  }
  const dFinal: State | undefined = k.dFinalNull ? undefined : p === 64 ? s.dFinal64 : s.dFinal32;
  if (form.gdC !== null) return chunkGdReferenceBackward(decl, inp, st, cfg, form.gdC, dy, dFinal);
  const pair = judgePair(decl);
  return { ...out, ...fromInnerGrads(pair.backward(pair.forward(inp, st, cfg).saved, inp, dy, cfg, dFinal)) };
}

/**
 * The precision the library declares for a function (docs/spec/precision.md#declaration): storage and
 * state f32, bf16 or f16 (skipReason turns anything else away), accumulate f32 or f64.
 */
export function declaredPrecision(lib: KernelLib, symbol: string): Precision {
  const dt = lib.dtypes(symbol);
  if (typeof dt === "string") return F32_STORE_F64_ACC;
  return { storage: wireDType(dt.storage), state: wireDType(dt.state), accumulate: dt.accumulate === "f32" ? "f32" : "f64" };
}

/**
 * Kernel outputs against ref64 and the plain reference (the reference in f32, summed in the
 * kernel's declared accumulate dtype), per sequence; a tensor the reference lacks is zero.
 */
function compareAll(decl: RuleDecl, frozen: boolean, k: KSpec, seqs: Seq[], cfg: RuleConfig, kernel: PerSeq[], which: "forward" | "backward",
  exercised: Set<string>, who: string, precision: Precision, form: RefForm, shape: Shape): CaseOutcome {
  const ref = (s: Seq, p: 32 | 64) => (which === "forward" ? refForward(decl, frozen, s, p, cfg, form) : refBackward(decl, frozen, s, p, cfg, k, form));
  const r64 = seqs.map((s) => ref(s, 64));
  const r32 = seqs.map((s, n) => plainYardstickSeq(precision.accumulate, r64[n]!, () => asStored(ref(s, 32), precision), plainRuns(decl)));
  return flashCompare(comparedItems(kernel, r64, r32, frozen, "abi", true), exercised, who, precision, { layout: { B: shape.B, H: shape.H, T: shape.T, C: k.C } });
}

/** Splits batched kernel outputs [B, T, H, w] and [B, H, ...] into per-sequence records. */
export function perSequence(a: Pick<RuleAbi, "channelGates">, shape: Shape, out: { y?: Float32Array; state?: Arrays; grads?: Arrays; dState0?: Arrays }): PerSeq[] {
  const N = shape.B * shape.H;
  const tok = (arr: Float32Array, name: string, n: number) => {
    const w = tokenWidth(a, name, shape.d);
    return unpackTokens(arr, shape, w, n, new Float32Array(shape.T * w));
  };
  const each = (rec: Arrays | undefined, f: (a: Float32Array, name: string) => Float32Array) =>
    Object.fromEntries(Object.entries(rec ?? {}).map(([name, a]) => [name, f(a, name)]));
  return Array.from({ length: N }, (_, n) => ({
    ...(out.y !== undefined ? { y: tok(out.y, "y", n) } : {}),
    state: each(out.state, (a) => unpackState(a, N, n)),
    grads: each(out.grads, (a, name) => tok(a, name, n)),
    dState0: each(out.dState0, (a) => unpackState(a, N, n)),
  }));
}

/** The ABI's gradient outputs (dk, dalpha, ...) by input name. */
export const byInput = (grads: Arrays): Arrays => Object.fromEntries(Object.entries(grads).map(([g, a]) => [gradInput(g as GradName), a]));

/** Runs the kernels of one case: the forward's outputs and (backward) the gradients, per sequence. */
export function runKernels(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, seqs: Seq[], cfg: RuleConfig, shape: Shape,
  withBackward: boolean): { forward: PerSeq[]; backward: PerSeq[] } {
  const dy = k.dyNull ? null : batchDy(seqs, shape);
  if (frozen) {
    const fz = requireFrozen(lib, decl.key);
    const q = batchQ(seqs, shape), st = batchState(fz.abi.state, seqs.map((s) => s.st32));
    const f = fz.forward(shape, cfg, q, st);
    try {
      const forward = perSequence(fz.abi, shape, { y: f.y });
      if (!withBackward) return { forward, backward: [] };
      const g = fz.backward(shape, cfg, q, st, f.ws, dy);
      return { forward, backward: perSequence(fz.abi, shape, { grads: { q: g.dq }, dState0: g.dState }) };
    } finally {
      f.ws.free();
    }
  }
  const pair = requirePair(lib, decl.key);
  const inputs = batchInputs(pair.abi, seqs, shape), st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
  const f = pair.forward(shape, k.C, cfg, inputs, st0);
  try {
    const forward = perSequence(pair.abi, shape, { y: f.y, state: f.state });
    if (!withBackward) return { forward, backward: [] };
    const dFinal = k.dFinalNull ? null : batchState(pair.abi.state, seqs.map((s) => s.dFinal32));
    const g = pair.backward(shape, k.C, cfg, inputs, st0, f.ws, dy, dFinal);
    return { forward, backward: perSequence(pair.abi, shape, { grads: byInput(g.grads), dState0: g.dState0 }) };
  } finally {
    f.ws.free();
  }
}

/**
 * One phase of a case: the forward kernel's y (and, unfrozen, every final state tensor), or every
 * gradient of the backward kernel, d(initial state) included (frozen: dq and d(state)), judged at
 * the precision the phase's function declares.
 */
function phaseCase(which: "forward" | "backward", decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome {
  const form = refFormOf(decl, frozen, lib);
  if (typeof form === "string") return { ok: false, message: form };
  const fn = symbolName(decl.key, frozen ? `frozen_${which}` : which);
  const precision = declaredPrecision(lib, fn);
  const { seqs, cfg, shape } = sequencesOf(decl, k, frozen, precision);
  const r = runKernels(decl, frozen, lib, k, seqs, cfg, shape, which === "backward");
  return withForm(compareAll(decl, frozen, k, seqs, cfg, r[which], which, exercised, fn, precision, form, shape), form);
}

export const forwardCase = (decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome =>
  phaseCase("forward", decl, frozen, lib, k, exercised);
export const backwardCase = (decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome =>
  phaseCase("backward", decl, frozen, lib, k, exercised);

/** Names the reference in the outcome when it is not the sequential rule. */
function withForm(o: CaseOutcome, form: RefForm): CaseOutcome {
  if (form.gdC === null) return o;
  const ref = `reference: chunk-start GD, C = ${form.gdC} (declared by the kernel)`;
  return { ...o, ...(o.message !== undefined ? { message: `${o.message} [${ref}]` } : {}), details: { ...(o.details ?? {}), reference: ref } };
}
