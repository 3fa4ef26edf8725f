/**
 * One phase case of a kernel check, for every backend (docs/spec/kernel-abi.md#kernel-backends):
 * run the backend's forward or backward on the case (cases/kernel-backend.ts KernelRun, per sequence
 * n = b·H + h), stop at a hazard the probes saw (docs/spec/hazards.md), compute the f64 reference on
 * every sequence (oracle/kernel-reference.ts, from the one sequence record cases/kernel-seq.ts) and
 * the yardstick, and judge (oracle/kernel-judge.ts flashCompare).
 *
 * What differs by kind is passed in, never branched on: how the backend is called (`run`), the
 * reference's terms (`reference`: the phases it runs and its options; `toKernel`: its tensors in
 * the kernel's parametrisation), the yardstick the declaration names (`yardstick`: the TypeScript
 * plain reference, PyTorch's, the TF32 one) and the judge's options. A backend that answers at once
 * gets its verdict at once; one that answers later, its promise.
 */
import { hazardVerdict } from "../ffi/hazards.ts";
import type { CaseVerdict } from "../oracle/compare.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import { flashCompare, type Compared, type JudgeOptions } from "../oracle/kernel-judge.ts";
import { referenceRun, type Phases, type ReferenceOptions } from "../oracle/kernel-reference.ts";
import { plainCase, plainOrders, plainRuns, plainYardstickOf } from "../oracle/plain-reference.ts";
import { enterAccumulate, leaveAccumulate, roundedCopy, type Precision } from "../src/precision.ts";
import type { InnerInputs, RuleConfig, RuleDecl } from "../src/rules/types.ts";
import type { KernelRun } from "./kernel-backend.ts";
import type { KernelSeq } from "./kernel-seq.ts";
import { comparedItems, isStateTensor, mapSeq, type KernelNames, type NameStyle } from "./kernel-tensors.ts";
import { then, type Maybe } from "./maybe.ts";

/** The references of a case: ref64 and the yardstick, per sequence. */
export interface PhaseReferences {
  readonly r64: readonly SeqTensors[];
  readonly r32: readonly SeqTensors[];
}

export interface PhaseCase {
  readonly decl: RuleDecl;
  readonly frozen: boolean;
  /** The case's sequences and its rule config (a sequence of another length T reads it at T). */
  readonly seqs: readonly KernelSeq[];
  readonly cfg: RuleConfig;
  /** The backend's kernel call on the case (its kind's batch is the caller's). */
  readonly run: () => Maybe<KernelRun>;
  /** What the probes' rerun found (a kernel that declares a tolerance), before the references. */
  readonly afterRun?: (run: KernelRun) => void;
  /** The reference's phases and options (a NULL dy or d(final state), chunk-start GD). */
  readonly reference: { readonly phases: Phases; readonly options?: ReferenceOptions };
  /** Sequence n's reference tensors in the kernel's terms (identity where they are the reference's). */
  readonly toKernel?: (n: number, r: SeqTensors) => SeqTensors;
  /** The yardstick per sequence, given ref64; and what else must hold of the references. */
  readonly yardstick: (r64: readonly SeqTensors[]) => Maybe<readonly SeqTensors[]>;
  /** The references once computed (a case judged under several configurations computes them once). */
  readonly cache?: { refs?: PhaseReferences };
  /** The judge: the items' names and labels, whether every reference tensor is an item, its options. */
  readonly style: NameStyle;
  readonly all: boolean;
  /** A py: kernel's names of its tensors: failure messages name both (kernel-tensors.ts kernelLabel). */
  readonly names?: KernelNames;
  readonly exercised: Set<string>;
  /** The kernel as the verdict names it; absent: as its run names it. */
  readonly who?: string;
  readonly precision: Precision;
  readonly options: JudgeOptions;
  /** The judged items, before the verdict (a dump). */
  readonly onItems?: (items: readonly Compared[]) => void;
  /** The judge's verdict as the check gives it (a hazard's is given as it is). */
  readonly judged?: (v: CaseVerdict, items: readonly Compared[]) => CaseVerdict;
}

/** The f64 reference on every sequence of the case, each at its own length. */
export function references64(p: Pick<PhaseCase, "decl" | "frozen" | "seqs" | "cfg" | "reference" | "toKernel">): SeqTensors[] {
  return p.seqs.map((s, n) => {
    const cfg = s.T === p.cfg.seq_len ? p.cfg : { ...p.cfg, seq_len: s.T };
    const r = referenceRun(p.decl, p.frozen, { inputs: s.in64 as unknown as InnerInputs, state: s.st64, dy: s.dy64, dFinal: s.dFinal64 }, cfg, p.reference.phases, p.reference.options);
    return p.toKernel === undefined ? r : p.toKernel(n, r);
  });
}

/**
 * A plain reference's outputs as the kernel stores them: per-token tensors and gates (y, dk, dalpha,
 * ...) rounded to the storage dtype, states and state gradients to the state dtype. Identity for f32.
 */
export function asStored(rec: SeqTensors, p: Pick<Precision, "storage" | "state">): SeqTensors {
  if (p.storage === "f32" && p.state === "f32") return rec;
  return mapSeq(rec, (a, k) => roundedCopy(isStateTensor(k) ? p.state : p.storage, a));
}

/**
 * The yardstick of a kernel case, for every kind (docs/spec/precision.md#plain): per sequence, the
 * plain reference — the reference with the case's phases and options on the sequence's inputs as the
 * kernel stores them (an abi sequence's f32 copies; a canonical one's values through
 * oracle/plain-reference.ts plainCase), summed in the declared accumulate dtype
 * (TF32 products included) in every order plainRuns names, its outputs as the kernel stores them and
 * in the kernel's terms (`toKernel`), the runs combined per element (the value farthest from ref64).
 * A py: kernel summing in f32 or f64 is held to its PyTorch reference instead (its kind's yardstick,
 * conformance/kernel/python/session.ts plainReference), which the kind passes in its place.
 */
export function kernelYardstick(p: Pick<PhaseCase, "decl" | "frozen" | "seqs" | "cfg" | "reference" | "precision" | "toKernel">) {
  const { decl, frozen, precision } = p, { phases, options } = p.reference;
  const acc = precision.accumulate, orders = plainOrders(acc, plainRuns(decl));
  // each run made here, under its rounding, and the runs combined (oracle/plain-reference.ts plainYardstickOf)
  const runOf = (s: KernelSeq, n: number, order: (typeof orders)[number]): SeqTensors => {
    const cfg = s.T === p.cfg.seq_len ? p.cfg : { ...p.cfg, seq_len: s.T };
    // an abi sequence's f32 copies are its stored values already (a bench's sequences carry only those)
    const c = "in32" in s && s.in32 !== undefined ? { inputs: s.in32, state: s.st32, dy: s.dy32, dFinal: s.dFinal32 }
      : plainCase({ inputs: s.in64 as unknown as InnerInputs, state: s.st64, dy: s.dy64, dFinal: s.dFinal64 }, precision);
    const before = enterAccumulate(acc, order);
    try {
      const r = asStored(referenceRun(decl, frozen, c, cfg, phases, options), precision);
      return p.toKernel === undefined ? r : p.toKernel(n, r);
    } finally {
      leaveAccumulate(before);
    }
  };
  return (r64: readonly SeqTensors[]): SeqTensors[] => p.seqs.map((s, n) => plainYardstickOf(r64[n]!, orders.map((o) => runOf(s, n, o))));
}

/** The phase case's verdict (module comment). */
export function phaseVerdict(p: PhaseCase): Maybe<CaseVerdict> {
  return then(p.run(), (run) => {
    // a read past an input's end, a write into an input, two runs that differ: named as such, before any comparison
    const hazard = hazardVerdict(run.hazards, run.who);
    if (hazard !== null) return hazard;
    p.afterRun?.(run);
    const cached = p.cache?.refs;
    const refs: Maybe<PhaseReferences> = cached ?? (() => {
      const r64 = references64(p);
      return then(p.yardstick(r64), (r32) => ({ r64, r32 }));
    })();
    return then(refs, (r) => {
      if (p.cache !== undefined) p.cache.refs = r;
      const { items, verdict: v } = phaseJudgement(p, run, r);
      p.onItems?.(items);
      return p.judged === undefined ? v : p.judged(v, items);
    });
  });
}

/**
 * The judge's step of a phase case, on data: the run's tensors against the references, as items
 * named as the report names them, and the judge's verdict (before the check's own `judged`).
 */
function phaseJudgement(p: Pick<PhaseCase, "frozen" | "style" | "all" | "names" | "exercised" | "who" | "precision" | "options">, run: KernelRun,
  r: PhaseReferences): { readonly items: Compared[]; readonly verdict: CaseVerdict } {
  const items = comparedItems(run.perSeq, r.r64, r.r32, p.frozen, p.style, p.all, p.names);
  return { items, verdict: flashCompare(items, p.exercised, p.who ?? run.who, p.precision, p.options) };
}

/** The verdict of a phase case whose backend and yardstick answer at once (a native library, an in-process kernel). */
export function phaseVerdictNow(p: PhaseCase & { readonly run: () => KernelRun; readonly yardstick: (r64: readonly SeqTensors[]) => readonly SeqTensors[] }): CaseVerdict {
  const v = phaseVerdict(p);
  if (v instanceof Promise) throw new Error("a phase case whose backend answers at once gave a promise");
  return v;
}
