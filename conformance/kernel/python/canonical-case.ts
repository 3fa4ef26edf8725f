/**
 * The generated cases of the py: backend checks (docs/spec/py-backend.md#cases): B sequences times
 * H heads, each (b, h) an independent sequence of one rule (the rule registry's case generator
 * for the first, its own seed, gates and state for the others), packed in the canonical kernel
 * layout: per-token [B, T, H, d], gates [B, T, H], states [B, H, rows, cols]. Values are rounded
 * once, before anything else, to the kernel's storage dtype (inputs, gates, dy) and state dtype
 * (initial state, d(final state)), so the kernel, the plain reference and ref64 see identical inputs
 * (docs/spec/py-backend.md#precision).
 */
import * as fc from "fast-check";
import { buildRuleCase, clampHyper, ruleCaseSpecArb, type RuleCaseSpec } from "../../../cases/rule-case.ts";
import type { Precision, StorageDType } from "../../../src/precision.ts";
import { Rng, uniformTensor } from "../../../src/rng.ts";
import { frozenForwardSaved, ruleForwardSaved } from "../../../src/rules/level.ts";
import { INNER_INPUT_NAMES, type InnerInputs, type RuleConfig, type RuleDecl } from "../../../src/rules/types.ts";
import { Tensor } from "../../../src/tensor.ts";
import { F32_STORE_F64_ACC } from "../../../oracle/kernel-judge.ts";
import type { SeqTensors } from "../../../oracle/kernel-case.ts";
import { absentInputs, declaredHeadDim, kernelGradient, kernelValue, NO_CONVENTIONS, referenceValue, type Conventions } from "./conventions.ts";
import { seqExtrasArb, type CanonicalCaseSpec } from "../../../cases/kernel-batch.ts";
import { packedLabel } from "../../../cases/kernel-regimes.ts";
import { cuSeqlens, packPackedTokens, packStates, packTokens, unpackPackedTokens, unpackState, unpackTokens } from "../../../cases/kernel-layout.ts";
import { fromInnerGrads } from "../../../cases/kernel-tensors.ts";
import { kernelSequence, seqSpecs, type KernelSeq } from "../../../cases/kernel-seq.ts";
import { innerCase } from "../../../cases/inner-case.ts";
import { edgeConventions, edgeLabel, saturateGates } from "./edges.ts";

/**
 * The declared packed case every py: check of a kernel that takes `cu_seqlens` runs
 * (docs/spec/py-backend.md#packed): lengths [C − 1, 1, C + 1] at the smallest chunk size C, d = 4,
 * H = 2; the second sequence ends at T = C, a chunk boundary of the packed stream.
 */
export function pyPackedExample(decl: RuleDecl, C: number): CanonicalCaseSpec {
  const mins = decl.checkMinimums ?? {};
  const lengths = [C - 1, 1, C + 1].filter((L) => L >= 1);
  const [base] = fc.sample(ruleCaseSpecArb(decl, { d: [4, 4], seq_len: [lengths[0]!, lengths[0]!] }), { seed: 2, numRuns: 1 });
  const [extra] = fc.sample(seqExtrasArb(lengths.length * 2 - 1, ["random", "init"]), { seed: 2, numRuns: 1 });
  return { base: clampHyper(decl, { ...base!, d: Math.max(4, mins.d ?? 1) }), B: 1, H: 2, extra: extra!, dFinalSeed: 2, lengths };
}

/** The inner inputs a rule reads: the ones its reference backward differentiates (absent = not read). */
export type InnerName = (typeof INNER_INPUT_NAMES)[number];

/**
 * One sequence of a canonical case: values rounded to the kernel's dtypes, held in f64 tensors.
 * `kin64` is what the kernel receives (in its own parametrisation, docs/spec/py-backend.md#conventions),
 * `in64` what ref32 and ref64 receive: the same values, mapped exactly in f64 (conformance/kernel/python/conventions.ts).
 */
export type PySeq = KernelSeq<"canonical">;

export interface PyCase {
  spec: CanonicalCaseSpec;
  cfg: RuleConfig;
  /** The kernel's batch dimension (1 for a packed batch). */
  B: number;
  /** The kernel's T: every sequence's length, or a packed batch's total ΣL. */
  T: number;
  H: number;
  /** Sequence n = b·H + h (a packed batch: n = i·H + h, packed sequence i, head h). */
  seqs: PySeq[];
  /** A packed variable-length batch: its sequences' lengths and `cu_seqlens` (docs/spec/py-backend.md#packed); else null. */
  packed: { lengths: number[]; cu: number[] } | null;
  /** The inputs sent to the reference (those the rule reads). */
  inputs: InnerName[];
  /** The inputs sent to the kernel and compared: `inputs` less the absent ones. */
  kernelInputs: InnerName[];
  /** The inputs the kernel declares absent (generated at their neutral value). */
  absent: InnerName[];
  /** The gates the kernel takes once per head: sent, equal over a head's tokens and sequences, their gradient not compared. */
  perHead: InnerName[];
  conv: Conventions;
  stateNames: string[];
  /** A frozen read: inputs q, the state it reads, no final state. */
  frozen: boolean;
}

/**
 * Sequence n's values in the canonical form: its rule case's values (`spec`'s; `h`: its head, n mod
 * H) in the kernel's parametrisation and the references', rounded once from f64 to the kernel's dtypes.
 */
function pySequence(decl: RuleDecl, spec: RuleCaseSpec, inputs: readonly InnerName[], frozen: boolean, dFinalRng: Rng, p: Precision, conv: Conventions, h: number): PySeq {
  const c = innerCase(decl, spec, frozen);
  const rawRng = new Rng(spec.seed ^ 0x2c1b3c6d);
  const raw = c.inputs as unknown as Readonly<Record<string, Tensor>>;
  const sent = Object.fromEntries(inputs.map((n) => [n, kernelValue(conv, n, raw[n]!, rawRng, h)]));
  // a frozen read leaves the state unchanged: there is no final state to take a gradient
  const dFinal = frozen ? {} : Object.fromEntries(Object.entries(c.state).map(([n, t]) => [n, uniformTensor("f64", t.shape, dFinalRng, -1, 1)]));
  return kernelSequence("canonical", c, h, p, {
    // an input declared in its own dtype (input_dtypes) is rounded to that one
    inputs: sent, dtypeOf: (n) => conv.input_dtypes?.[n] ?? p.storage, toReference: (n, t) => referenceValue(conv, n, t, c.cfg.d, h), dFinal,
  });
}

/**
 * The inputs whose gradient the reference backward returns, on a small case of the rule, and the
 * state names the forward takes (a frozen read: the names it reads, those of its dState).
 */
function readInputs(decl: RuleDecl, spec: RuleCaseSpec, frozen: boolean): { inputs: InnerName[]; states: string[] } {
  const c = buildRuleCase(decl, spec, "f64", frozen);
  if (frozen) {
    const q = frozenForwardSaved(decl, c.X, c.params, c.state, c.cfg).saved.q!;
    const fw = decl.frozen!.forward(q, c.state, c.cfg);
    return { inputs: ["q"], states: Object.keys(decl.frozen!.backward(fw.saved, q, c.dy, c.cfg).dState) };
  }
  const r = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg);
  const inp: Record<string, Tensor | undefined> = { ...r.saved, x: r.saved.X };
  const fw = decl.inner.forward(inp as unknown as InnerInputs, c.state, c.cfg);
  const g = fromInnerGrads(decl.inner.backward(fw.saved, inp as unknown as InnerInputs, c.dy, c.cfg));
  return { inputs: INNER_INPUT_NAMES.filter((n) => inp[n] !== undefined && g.grads[n] !== undefined), states: Object.keys(c.state) };
}

/**
 * `p`: the kernel's precision (its storage and state dtypes are what the case is rounded to);
 * `conv`: its declared conventions (an absent input without a neutral value throws, naming it).
 */
export function buildPyCase(decl: RuleDecl, spec: CanonicalCaseSpec, frozen = false, p: Precision = F32_STORE_F64_ACC, declared: Conventions = NO_CONVENTIONS): PyCase {
  // a scale edge calls the kernel at another query scale: the reference reads q at that one (edges.ts)
  const conv = edgeConventions(declared, spec.edge);
  // a frozen read of a zero state reads zero: frozen cases read random states
  const st = <X extends { state: "init" | "random" }>(x: X): X => (frozen ? { ...x, state: "random" } : x);
  const base = st({ ...spec.base, d: declaredHeadDim(conv, spec.base.d) });
  const { inputs, states } = readInputs(decl, base, frozen);
  const rng = new Rng(spec.dFinalSeed);
  const lengths = spec.lengths ?? null;
  if (lengths !== null && (spec.B !== 1 || lengths.length === 0 || lengths.some((L) => !Number.isInteger(L) || L < 0) || !lengths.some((L) => L > 0))) {
    throw new Error(`a packed case has B = 1 and non-negative integer lengths, one at least positive, got B = ${spec.B}, lengths [${lengths.join(", ")}]`);
  }
  // packed sequence i, head h: its own length; the others are the first's rule case with their own seed, gates and state
  const count = lengths === null ? spec.B * spec.H : lengths.length * spec.H;
  if (spec.extra.length < count - 1) throw new Error(`a case of ${count} sequences needs ${count - 1} extra sequences, got ${spec.extra.length}`);
  const seqLengths = lengths === null ? undefined : Array.from({ length: count }, (_, n) => lengths[Math.floor(n / spec.H)]!);
  const absent = absentInputs(conv, inputs, "the kernel") as InnerName[];
  // sequence n is head n mod H (n = b·H + h, a packed batch's n = i·H + h): a gate form's per-head parameters
  const seqs = seqSpecs(base, spec.extra.map(st), count, seqLengths).map((s, n) => pySequence(decl, s, inputs, frozen, rng, p, conv, n % spec.H));
  for (const q of seqs) for (const n of Object.keys(q.st64)) if (!states.includes(n)) delete q.st64[n];
  const cfg = buildRuleCase(decl, base, "f64").cfg;
  const perHead = inputs.filter((n) => conv.per_head?.includes(n) === true && !absent.includes(n));
  if (spec.edge?.kind === "saturated") saturateGates(seqs, decl, cfg, conv, inputs.filter((n) => !absent.includes(n) && !perHead.includes(n)), p.storage, base.seed);
  for (const n of perHead) perHeadGate(seqs, n, spec.H);
  return {
    spec, cfg, B: spec.B, T: lengths === null ? cfg.seq_len : lengths.reduce((a, b) => a + b, 0), H: spec.H, seqs, inputs,
    packed: lengths === null ? null : { lengths: [...lengths], cu: cuSeqlens(lengths) }, kernelInputs: inputs.filter((n) => !absent.includes(n)), absent, perHead, conv,
    stateNames: states, frozen,
  };
}

/**
 * Gate `n` taken once per head (docs/spec/py-backend.md#per-head): every token of every sequence of
 * head h gets the first token of the first non-empty sequence of that head (the rule's own draw), in
 * the kernel's values and the reference's alike.
 */
function perHeadGate(seqs: PySeq[], n: InnerName, H: number): void {
  for (let h = 0; h < H; h++) {
    const own = seqs.filter((_, i) => i % H === h);
    const first = own.find((s) => s.T > 0);
    if (first === undefined) continue;
    for (const s of own) {
      for (const part of [s.kin64, s.in64]) {
        const src = part === s.kin64 ? first.kin64[n]! : first.in64[n]!;
        const w = src.size / first.T, out = new Tensor("f64", [...part[n]!.shape]);
        for (let t = 0; t < s.T; t++) for (let i = 0; i < w; i++) out.data[t * w + i] = src.data[i]!;
        part[n] = out;
      }
    }
  }
}

/** Per-sequence tensors [T, ...] (one per sequence of the case, in its order) -> canonical [B, T, H, ...] (a packed batch: [1, ΣL, H, ...]; f64 values, already rounded). */
export function tokensTensor(c: PyCase, per: readonly Tensor[]): Tensor {
  const first = per[0]!;
  const inner = first.shape.slice(1);
  const out = new Tensor("f64", [c.B, c.T, c.H, ...inner]);
  const w = inner.reduce((a, b) => a * b, 1), parts = per.map((t) => t.data);
  if (c.packed !== null) packPackedTokens(parts, c.packed.lengths, c.H, w, out.data);
  else packTokens(parts, c, w, out.data);
  return out;
}

/** Canonical [B, T, H, ...] -> sequence n's [T, ...] values (a packed batch: its L_i tokens). */
export function seqTokens(c: PyCase, t: Tensor, n: number): Float64Array {
  const w = t.size / (c.B * c.T * c.H);
  const out = new Float64Array(c.seqs[n]!.T * w);
  return c.packed !== null ? unpackPackedTokens(t.data, c.packed.lengths, c.H, w, n, out) : unpackTokens(t.data, c, w, n, out);
}

/** The leading dimensions of a case's states as the kernel takes them: [B, H], a packed batch's [N, H] (one state per sequence). */
export const stateLead = (c: PyCase): number[] => [c.packed === null ? c.B : c.packed.lengths.length, c.H];

/** The rule config of sequence n: the case's, at that sequence's length. */
export const seqCfg = (c: PyCase, n: number): RuleConfig => (c.seqs[n]!.T === c.cfg.seq_len ? c.cfg : { ...c.cfg, seq_len: c.seqs[n]!.T });

/**
 * A packed batch's sequences as ordinary batches of one length each (what a reference that stacks
 * its sequences [N, T, ...] takes): per distinct length, a case of its sequences (B = count, H = 1)
 * and their indices in the packed case. An unpacked case is its own one group.
 */
export function lengthGroups(c: PyCase): { sub: PyCase; seqs: number[] }[] {
  if (c.packed === null) return [{ sub: c, seqs: c.seqs.map((_, n) => n) }];
  const by = new Map<number, number[]>();
  c.seqs.forEach((s, n) => by.set(s.T, [...(by.get(s.T) ?? []), n]));
  return [...by].map(([T, seqs]) => ({
    seqs, sub: { ...c, B: seqs.length, H: 1, T, cfg: seqCfg(c, seqs[0]!), seqs: seqs.map((n) => c.seqs[n]!), packed: null },
  }));
}

/** Per-sequence tensors -> [N, ...] with n = b·H + h (which is also the canonical [B, H, ...] order). */
export function statesTensor(c: PyCase, per: readonly Tensor[], lead: number[] = [c.seqs.length]): Tensor {
  const first = per[0]!;
  const out = new Tensor("f64", [...lead, ...first.shape]);
  packStates(per.map((t) => t.data), out.data);
  return out;
}

/** Sequence n of a tensor whose leading dimensions enumerate the sequences ([N, ...] or [B, H, ...]). */
export function seqState(c: PyCase, t: Tensor, n: number): Float64Array {
  return Float64Array.from(unpackState(t.data, c.seqs.length, n));
}

/** A line naming the case for messages. */
export function describeCase(c: PyCase): string {
  if (c.spec.edge !== undefined) return `${edgeLabel(c.spec.edge)}: ${describeCase({ ...c, spec: { ...c.spec, edge: undefined } })}`;
  if (c.packed !== null) return `${packedLabel(c.packed.lengths)} (sequence n = i·H + h) B=1 H=${c.H} T=${c.T} d=${c.cfg.d} seed=${c.spec.base.seed}`;
  return `B=${c.B} H=${c.H} T=${c.T} d=${c.cfg.d} seed=${c.spec.base.seed}`;
}

/**
 * A reference's tensors of sequence n as gradients w.r.t. the kernel's inputs (f64, before any
 * rounding): through the declared conventions' VJPs; absent inputs' gradients dropped. `stored`:
 * the normalisation's VJP reads the normalised q, k as stored in that dtype (kernelGradient).
 */
export function toKernelGrads<A extends ArrayLike<number>>(c: PyCase, n: number, r: SeqTensors<A>, stored?: StorageDType): SeqTensors<ArrayLike<number>> {
  const grads: Record<string, ArrayLike<number>> = {};
  for (const [name, g] of Object.entries(r.grads)) {
    if (c.absent.includes(name as InnerName) || c.perHead.includes(name as InnerName)) continue;
    const kin = c.seqs[n]!.kin64[name];
    grads[name] = kin === undefined ? g : kernelGradient(c.conv, name, kin.data, g, c.cfg.d, stored, c.seqs[n]!.h, kin.shape.length > 1 ? kin.shape[kin.shape.length - 1]! : 1);
  }
  return { ...r, grads };
}
