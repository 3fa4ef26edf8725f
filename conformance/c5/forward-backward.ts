/**
 * C5 forward and backward cases: the kernel's outputs on a batch of B·H sequences against the
 * TypeScript reference in f64 (ref64) and in f32 (ref32, the bound's yardstick), per tensor and
 * sequence — y and the final state; every input gradient and d(initial state), with dy and
 * d(final state) given or NULL (docs/spec/kernel-abi.md#backward).
 */
import { symbolName, type Shape } from "../../ffi/abi.ts";
import { wireDType, type Arrays, type KernelLib } from "../../ffi/lib.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { zeros, type Tensor } from "../../src/tensor.ts";
import { asStored, batchDy, batchInputs, batchQ, batchState, seqOf, sequencesOf, stateOf, widthOf, type KSpec, type Seq } from "./batch.ts";
import { stateNames } from "../../src/rules/state-grad.ts";
import type { Precision } from "../../src/precision.ts";
import { plainYardstick } from "../../oracle/plain-reference.ts";
import { F32_STORE_F64_ACC, flashCompare, type Compared } from "./compare.ts";
import { requireFrozen, requirePair } from "./kernel-lib.ts";
import { chunkFormSymbol } from "../../ffi/abi.ts";
import { hasChunkStartGd } from "../../src/rules/chunk-gd.ts";
import { chunkGdReferenceBackward, chunkGdReferenceForward } from "../chunk/reference.ts";

/** What a kernel run produced for one sequence, by compared name. */
export type PerSeq = Record<string, Float32Array>;

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
function refForward(decl: RuleDecl, frozen: boolean, s: Seq, p: 32 | 64, cfg: RuleConfig, form: RefForm): Record<string, ArrayLike<number>> {
  const inp = p === 64 ? s.in64 : s.in32, st = p === 64 ? s.st64 : s.st32;
  if (frozen) return { y: decl.frozen!.forward(inp.q, st, cfg).y.data };
  if (form.gdC !== null) return chunkGdReferenceForward(decl, inp, st, cfg, form.gdC);
  const r = decl.inner.forward(inp, st, cfg);
  const out: Record<string, ArrayLike<number>> = { y: r.y.data };
  for (const [n, t] of Object.entries(r.finalState)) out[`state ${n}`] = t.data;
  return out;
}

/** The reference's gradients of one sequence (absent = zero, filled in by the comparison). */
function refBackward(decl: RuleDecl, frozen: boolean, s: Seq, p: 32 | 64, cfg: RuleConfig, k: KSpec, form: RefForm): Record<string, ArrayLike<number>> {
  const inp = p === 64 ? s.in64 : s.in32, st = p === 64 ? s.st64 : s.st32;
  const dy0 = p === 64 ? s.dy64 : s.dy32;
  const dy = k.dyNull ? zeros(dy0.dtype, dy0.shape) : dy0;
  const out: Record<string, ArrayLike<number>> = {};
  if (frozen) {
    const fz = decl.frozen!;
    const g = fz.backward(fz.forward(inp.q, st, cfg).saved, inp.q, dy, cfg);
    out.dq = g.dq.data;
    for (const [n, t] of Object.entries(g.dState)) out[`d${n}`] = t.data;
    return out;
  }
  const dFinal: State | undefined = k.dFinalNull ? undefined : p === 64 ? s.dFinal64 : s.dFinal32;
  if (form.gdC !== null) return chunkGdReferenceBackward(decl, inp, st, cfg, form.gdC, dy, dFinal);
  const g = decl.inner.backward(decl.inner.forward(inp, st, cfg).saved, inp, dy, cfg, dFinal) as Record<string, unknown>;
  for (const [n, t] of Object.entries(g)) if (n !== "dState0" && t !== undefined) out[n] = (t as Tensor).data;
  for (const [n, t] of Object.entries((g.dState0 ?? {}) as Record<string, Tensor>)) out[`d${n}_0`] = t.data;
  return out;
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
 * kernel's declared accumulate dtype), per sequence; a name the reference lacks is zero.
 */
function compareAll(decl: RuleDecl, frozen: boolean, k: KSpec, seqs: Seq[], cfg: RuleConfig, kernel: PerSeq[], which: "forward" | "backward",
  exercised: Set<string>, who: string, precision: Precision, form: RefForm): CaseOutcome {
  const items: Compared[] = [];
  const states = stateNames(decl);
  seqs.forEach((s, n) => {
    const r64 = which === "forward" ? refForward(decl, frozen, s, 64, cfg, form) : refBackward(decl, frozen, s, 64, cfg, k, form);
    const r32 = plainYardstick(precision.accumulate, r64, () =>
      asStored(which === "forward" ? refForward(decl, frozen, s, 32, cfg, form) : refBackward(decl, frozen, s, 32, cfg, k, form), states, precision));
    for (const name of new Set([...Object.keys(kernel[n]!), ...Object.keys(r64)])) {
      const kern = kernel[n]![name];
      const len = (r64[name] ?? kern)?.length ?? 0;
      items.push({ name, seq: n, kernel: kern, ref64: r64[name] ?? new Float64Array(len), ref32: r32[name] ?? new Float64Array(len) });
    }
  });
  return flashCompare(items, exercised, who, precision);
}

/** Splits batched kernel outputs into per-sequence arrays under the compared names. */
export function perSequence(shape: Shape, tokens: Arrays, states: Arrays): PerSeq[] {
  return Array.from({ length: shape.B * shape.H }, (_, n) => {
    const out: PerSeq = {};
    for (const [name, a] of Object.entries(tokens)) out[name] = seqOf(a, shape, widthOf(name, shape), n);
    for (const [name, a] of Object.entries(states)) out[name] = stateOf(a, shape, n).slice();
    return out;
  });
}

const prefixed = (rec: Arrays, pre: string, suf = ""): Arrays => Object.fromEntries(Object.entries(rec).map(([n, a]) => [`${pre}${n}${suf}`, a]));

/** Runs the kernels of one case: the forward's outputs and (backward) the gradients, per sequence. */
export function runKernels(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, seqs: Seq[], cfg: RuleConfig, shape: Shape,
  withBackward: boolean): { forward: PerSeq[]; backward: PerSeq[] } {
  const dy = k.dyNull ? null : batchDy(seqs, shape);
  if (frozen) {
    const fz = requireFrozen(lib, decl.key);
    const q = batchQ(seqs, shape), st = batchState(fz.abi.state, seqs.map((s) => s.st32));
    const f = fz.forward(shape, cfg, q, st);
    try {
      const forward = perSequence(shape, { y: f.y }, {});
      if (!withBackward) return { forward, backward: [] };
      const g = fz.backward(shape, cfg, q, st, f.ws, dy);
      return { forward, backward: perSequence(shape, { dq: g.dq }, prefixed(g.dState, "d")) };
    } finally {
      f.ws.free();
    }
  }
  const pair = requirePair(lib, decl.key);
  const inputs = batchInputs(pair.abi, seqs, shape), st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
  const f = pair.forward(shape, k.C, cfg, inputs, st0);
  try {
    const forward = perSequence(shape, { y: f.y }, prefixed(f.state, "state "));
    if (!withBackward) return { forward, backward: [] };
    const dFinal = k.dFinalNull ? null : batchState(pair.abi.state, seqs.map((s) => s.dFinal32));
    const g = pair.backward(shape, k.C, cfg, inputs, st0, f.ws, dy, dFinal);
    return { forward, backward: perSequence(shape, g.grads, prefixed(g.dState0, "d", "_0")) };
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
  return withForm(compareAll(decl, frozen, k, seqs, cfg, r[which], which, exercised, fn, precision, form), form);
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
