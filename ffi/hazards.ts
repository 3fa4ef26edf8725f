/**
 * The hazard probes of a kernel call (docs/spec/hazards.md), one definition for every backend
 * kind: the plan (guard regions, their patterns, the second run) and the verdict on what a call
 * was observed to do. Each backend carries the plan out where its memory lives — native
 * libraries in ffi/lib-call.ts (library memory through nlk_alloc), `py:` kernels in
 * python/nlc_torch/hazards.py (torch tensors; the plan travels in the request header) — and hands
 * its observations back as `Hazard` records, which `hazardVerdict` turns into a failure. The
 * module sits at the bottom layer so that the library loader can use it.
 *
 * 1. Guards: every tensor a kernel receives is a view into a larger buffer whose GUARD_BYTES
 *    before and after hold a pattern (POISON, a NaN with a payload, in the judged run); a native
 *    kernel's outputs are NaN-filled with a poisoned guard after them.
 * 2. Inputs unchanged: after the call every input buffer, guards included, must be bitwise what
 *    it was; a changed guard of an output is a write past its end.
 * 3. A second run with every input guard holding FINITE instead must agree with the first
 *    (bitwise unless the kernel declares a tolerance); when it does not, a repeat of both runs
 *    tells a read past an input's end (each repeat agrees with its twin: the guard's contents
 *    made the difference; one run per guarded tensor then names it) from nondeterminism.
 */
import type { StorageDType } from "../src/precision.ts";

/** Slack before and after every guarded buffer: 256 bytes keeps the data as aligned as the allocation. */
export const GUARD_BYTES = 256;

/** The guard pattern of the judged run, per wire dtype: a quiet NaN with a payload (bits). */
export const POISON: Readonly<Record<StorageDType, number>> = { f32: 0x7fc5a5a5, bf16: 0x7fc5, f16: 0x7e5a };
/** The guard pattern of the second run: 0.375 (exact in every dtype, a plausible gate value). */
export const FINITE: Readonly<Record<StorageDType, number>> = { f32: 0x3ec00000, bf16: 0x3ec0, f16: 0x3600 };

/** What a backend is asked to do around each kernel call (sent as is to the py: host). */
export interface HazardPlan {
  readonly guard_bytes: number;
  readonly poison: Readonly<Record<StorageDType, number>>;
  readonly finite: Readonly<Record<StorageDType, number>>;
  /** Run each call a second time (determinism, and the read-past-end test that does not rely on NaN propagating). */
  readonly rerun: boolean;
}

export const HAZARD_PLAN: HazardPlan = { guard_bytes: GUARD_BYTES, poison: POISON, finite: FINITE, rerun: true };

/** Where two runs of a call first differ. */
export interface RunDifference {
  /** The output that differs (y, state.M, grads.k; a native kernel's parameter name). */
  readonly output: string;
  readonly max_abs: number;
  /** The largest |value| of that output in the judged run. */
  readonly scale: number;
  /** Elements NaN in one run and not the other. */
  readonly nan_mismatch: number;
}

/** The kernel's own name of a tensor, where it differs from ours (a py: kernel's keyword). */
interface Named {
  readonly keyword?: string;
}

/** What a kernel call was observed to do that a correct kernel never does. */
export type Hazard =
  | ({ readonly kind: "read-past-end"; /** The input whose guard was read; null when no single guard changes the result. */ readonly tensor: string | null } & RunDifference & Named)
  | ({ readonly kind: "write-past-end"; readonly tensor: string; /** Guard elements changed after the tensor and before it. */ readonly after: number; readonly before: number } & Named)
  | ({ readonly kind: "wrote-input"; readonly tensor: string; readonly elements: number; readonly of: number } & Named)
  /** An output still holding the fill of memory the kernel allocated (a py: kernel, docs/spec/hazards.md#unwritten), in sequences n = b·H + h. */
  | { readonly kind: "unwritten"; readonly tensor: string; readonly elements: number; readonly of: number; readonly seqs: readonly number[] }
  | ({ readonly kind: "nondeterministic"; /** The declared tolerance (relative), or null: bitwise. */ readonly tolerance: number | null } & RunDifference);

const g = (x: number) => x.toPrecision(3);

function differs(d: RunDifference): string {
  return d.nan_mismatch > 0 ? `${d.output} has ${d.nan_mismatch} NaN element(s) in one run and not the other` : `${d.output} differs by up to ${g(d.max_abs)} (|${d.output}| up to ${g(d.scale)})`;
}

/** A tensor as a message names it: ours, and the kernel's keyword where that differs. */
function tensorOf(tensor: string, h: Named): string {
  return h.keyword !== undefined && h.keyword !== tensor ? `${tensor} (keyword '${h.keyword}')` : tensor;
}

/** The message of one hazard; `who` names the kernel (its function or callable). */
export function hazardMessage(h: Hazard, who: string): string {
  switch (h.kind) {
    case "read-past-end":
      return h.tensor === null
        ? `${who} read past the end of an input: with every input's guard region poisoned (NaN) rather than finite, ${differs(h)}, bitwise reproducibly, but no single input's guard changes it (docs/spec/hazards.md#guards)`
        : `input ${tensorOf(h.tensor, h)}: ${who} read past its end: ${differs(h)} when only the guard region after ${h.tensor} holds NaN instead of a finite value (docs/spec/hazards.md#guards)`;
    case "write-past-end":
      return `${tensorOf(h.tensor, h)}: ${who} wrote past its end (${h.after} guard element(s) after it${h.before > 0 ? `, ${h.before} before it` : ""} changed by the call; docs/spec/hazards.md#guards)`;
    case "wrote-input":
      return `${who} wrote into input ${tensorOf(h.tensor, h)} (${h.elements} of its ${h.of} elements changed by the call; docs/spec/hazards.md#inputs)`;
    case "unwritten":
      return `${who} left ${h.tensor}[seq ${h.seqs.join(", ")}] unwritten (an output the kernel allocates and does not store: ${h.elements} of its ${h.of} elements ` +
        "still hold the fill of the memory it allocated; docs/spec/hazards.md#unwritten)";
    case "nondeterministic":
      return h.tolerance === null
        ? `${who} is not deterministic: two runs of the same case differ: ${differs(h)}; a kernel that is nondeterministic by design declares its tolerance (docs/spec/hazards.md#determinism)`
        : `${who} differs between two runs of the same case beyond its declared tolerance ${g(h.tolerance)} (relative): ${differs(h)} (docs/spec/hazards.md#determinism)`;
  }
}

/** A failure naming every hazard observed, or null when there is none. */
export function hazardVerdict(hs: readonly Hazard[], who: string): { ok: false; message: string; details: Record<string, unknown> } | null {
  if (hs.length === 0) return null;
  return { ok: false, message: hs.map((h) => hazardMessage(h, who)).join("; "), details: { hazards: hs } };
}

/** Which tensors' guards hold the poison in one run: null = all of them (the judged run); the rest hold FINITE. */
export type Poisoned = readonly string[] | null;

/** What a py: request carries of the plan (python/nlc_torch/hazards.py reads it). */
export interface GuardRequest {
  readonly guard_bytes: number;
  readonly poison: Readonly<Record<StorageDType, number>>;
  readonly finite: Readonly<Record<StorageDType, number>>;
  readonly poisoned: Poisoned;
}

export const guardRequest = (plan: HazardPlan, poisoned: Poisoned): GuardRequest =>
  ({ guard_bytes: plan.guard_bytes, poison: plan.poison, finite: plan.finite, poisoned });

/** One guarded call as a backend reports it. */
export interface GuardedRun {
  /** Every output the call produced, by name, in a fixed order. */
  readonly outputs: readonly (readonly [string, ArrayLike<number>])[];
  /** The writes the backend saw into the inputs or any guard. */
  readonly writes: readonly Hazard[];
  /** The tensors whose guards the call had, by our name. */
  readonly guarded: readonly string[];
  /** The kernel's own name of a guarded tensor, where it has one. */
  readonly keywords?: Readonly<Record<string, string>>;
}

/** The judged run (the first, every guard poisoned) and what the probes found. */
export interface Probed<R extends GuardedRun> {
  readonly first: R;
  readonly hazards: Hazard[];
  readonly runs: number;
  /** A kernel declaring a tolerance: the largest relative difference between its two runs. */
  readonly rerunMaxRel?: number;
}

const same = (a: number, b: number) => Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));

/** Where two runs' outputs first differ (bitwise, or beyond `tol` of the output's largest |value|), or null. */
export function runDifference(a: GuardedRun, b: GuardedRun, tol: number | null): RunDifference | null {
  for (let i = 0; i < a.outputs.length; i++) {
    const [name, x] = a.outputs[i]!, y = b.outputs[i]?.[1];
    if (y === undefined || y.length !== x.length) return { output: name, max_abs: Number.POSITIVE_INFINITY, scale: 0, nan_mismatch: 0 };
    let maxAbs = 0, scale = 0, nan = 0, bitwise = true;
    for (let j = 0; j < x.length; j++) {
      const u = x[j]!, v = y[j]!;
      if (!same(u, v)) bitwise = false;
      if (Number.isNaN(u) !== Number.isNaN(v)) nan++;
      else if (!Number.isNaN(u)) {
        maxAbs = Math.max(maxAbs, Math.abs(u - v));
        scale = Math.max(scale, Math.abs(u));
      }
    }
    if (bitwise) continue;
    if (tol !== null && nan === 0 && maxAbs <= tol * Math.max(scale, 1e-30)) continue;
    return { output: name, max_abs: maxAbs, scale, nan_mismatch: nan };
  }
  return null;
}

function maxRel(a: GuardedRun, b: GuardedRun): number {
  let worst = 0;
  a.outputs.forEach(([, x], i) => {
    const y = b.outputs[i]![1];
    let d = 0, s = 0;
    for (let j = 0; j < x.length; j++) {
      if (Number.isNaN(x[j]!) || Number.isNaN(y[j]!)) continue;
      d = Math.max(d, Math.abs(x[j]! - y[j]!));
      s = Math.max(s, Math.abs(x[j]!));
    }
    if (s > 0) worst = Math.max(worst, d / s);
  });
  return worst;
}

/**
 * The runs of one probed call, as a generator: it yields which guards to poison and receives the
 * run's result (a py: kernel session makes each run as asked, conformance/kernel/python/session.ts;
 * a native library's call likewise, ffi/lib-call.ts invoke). Run 1: every guard poisoned (the judged run; writes end it). Run 2 (plan.rerun):
 * every guard finite; agreeing with run 1 ends it. Runs 3 and 4 repeat runs 1 and 2: if either
 * differs from its twin the kernel is not deterministic, else the guards' contents made the
 * difference and one run per guarded tensor (only its guard poisoned) names the tensors read past
 * their end.
 */
export function* probeRuns<R extends GuardedRun>(plan: HazardPlan, tol: number | null): Generator<Poisoned, Probed<R>, R> {
  const first = yield null;
  if (first.writes.length > 0 || !plan.rerun) return { first, hazards: [...first.writes], runs: 1 };
  const second = yield [];
  const rel = tol !== null ? { rerunMaxRel: maxRel(first, second) } : {};
  const d = runDifference(first, second, tol);
  if (d === null) return { first, hazards: [], runs: 2, ...rel };
  // runs 3 and 4 repeat runs 1 and 2: a kernel that reproduces both read its guards, else it is not deterministic
  const third = yield null;
  const again = runDifference(first, third, tol);
  if (again !== null) return { first, hazards: [{ kind: "nondeterministic", ...again, tolerance: tol }], runs: 3, ...rel };
  const fourth = yield [];
  const finiteAgain = runDifference(second, fourth, tol);
  if (finiteAgain !== null) return { first, hazards: [{ kind: "nondeterministic", ...finiteAgain, tolerance: tol }], runs: 4, ...rel };
  const hazards: Hazard[] = [];
  for (const label of first.guarded) {
    const alone = yield [label];
    const kw = first.keywords?.[label];
    if (runDifference(alone, second, tol) !== null) hazards.push({ kind: "read-past-end", tensor: label, ...d, ...(kw !== undefined ? { keyword: kw } : {}) });
  }
  return { first, hazards: hazards.length > 0 ? hazards : [{ kind: "read-past-end", tensor: null, ...d }], runs: 4 + first.guarded.length, ...rel };
}

/**
 * A check's report of what its probes did (details.probes), tallied from the runs made, not the
 * plan: `calls` kernel calls the probes passed, `rerun` of them run a second time.
 */
export interface ProbeSummary {
  guard_bytes: number;
  /** "bitwise", or the declared relative tolerance and the largest relative difference between two runs seen; "not run": no call was run twice. */
  determinism: "bitwise" | { tolerance: number; max_rel_seen: number } | "not run";
  calls: number;
  rerun: number;
}

/** What a backend reports of one probed call: the runs it made of it, and (a declared tolerance) their largest relative difference. */
export interface ProbedCall {
  readonly runs: number;
  readonly rerunMaxRel?: number;
}

/** Collects the probes' reports over a check's cases: what each call's runs were, as the backend made them. */
export class ProbeTally {
  private maxRel = 0;
  private calls = 0;
  private rerun = 0;
  constructor(private readonly plan: HazardPlan, private readonly tolerance: number | null) {}
  add(call: ProbedCall): void {
    this.calls++;
    if (call.runs >= 2) this.rerun++;
    if (call.rerunMaxRel !== undefined && call.rerunMaxRel > this.maxRel) this.maxRel = call.rerunMaxRel;
  }
  summary(): ProbeSummary {
    return {
      guard_bytes: this.plan.guard_bytes,
      determinism: this.rerun === 0 ? "not run" : this.tolerance === null ? "bitwise" : { tolerance: this.tolerance, max_rel_seen: this.maxRel },
      calls: this.calls, rerun: this.rerun,
    };
  }
}
