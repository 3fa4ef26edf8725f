/**
 * Checks of the chunk forms (docs/spec/chunk-forms.md): chunk-start GD for every rule that has it
 * (every memory rule), the exact chunked form for every rule that declares
 * `matrixChunk`:
 *   C8/chunk-gd/<rule>/c1-identity   chunk-start GD with C = 1 is the sequential forward, bitwise
 *                                    (state-free writes: bitwise for every C)
 *   C8/chunk-gd/<rule>/monotone      distance to sequential over a batch of 64, C = 1, 2, 4, 8, 16:
 *                                    0 at C = 1, > 0 at C = 2, most cases farther at C = 16 than at
 *                                    C = 2 (state-dependent writes)
 *   C1/chunk-gd/<rule>/backward      its gradient at C = 1 vs the rule's hand-written backward
 *   C1/chunk-gd/<rule>/tape          Delta, Titans: the rule-arithmetic form vs the tape form (forward, gradients)
 *   C2/chunk-gd/<rule>               its gradient vs finite differences
 *   C8/exact-chunk/<rule>/sequential exact chunked form vs sequential forward, every listed C
 *   C1/exact-chunk/<rule>/backward   its tape gradient vs the sequential hand-written backward
 *   C2/exact-chunk/<rule>            its tape gradient vs finite differences
 */
import * as fc from "fast-check";
import { bitwiseEqual, compareTensors, TOL_FD, TOL_ULP } from "../../oracle/compare.ts";
import { FD_METHOD } from "../../oracle/fd.ts";
import { gradCheck } from "../../oracle/gradcheck.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { chunkStartGd, exactChunked, type ChunkRun } from "../../src/rules/chunk-matrix.ts";
import { hasErrorChunk } from "../../src/rules/chunk-error.ts";
import { chunkStartGdForward, chunkStartGdGrads, hasChunkStartGd, writeReadsState } from "../../src/rules/chunk-gd.ts";
import { add, frobeniusDot } from "../../src/ops/index.ts";
import { RULES } from "../../src/rules/index.ts";
import { INNER_INPUT_NAMES, type InnerInputs, type RuleDecl, type State } from "../../src/rules/types.ts";
import { withTape } from "../../src/tape.ts";
import type { Tensor } from "../../src/tensor.ts";
import { buildChunkCase, chunkCaseArb, type ChunkCase, type ChunkCaseSpec } from "../../cases/chunk-case.ts";
import type { SizeLimits } from "../../cases/rule-case.ts";

const RUNS: ProfileRuns = { quick: 3, default: 10, deep: 100 };
const RUNS_FD: ProfileRuns = { quick: 3, default: 8, deep: 80 };
const GD_CURVE = [1, 2, 4, 8, 16] as const;
const EXACT_CS = [1, 2, 4, 8, 16, 64] as const;
/**
 * The curve property's batch and threshold (docs/spec/chunk-forms.md#chunk-start-gd-curve): per case
 * the distance at C = 16 is at most that at C = 2 in at most 3.2% of cases (measured, 4000 cases per
 * rule); with p ≤ 0.05, fewer than 40 of 64 farther has probability ≤ 1.8e-16 per batch.
 */
const BATCH = 64;
const CURVE_NEED = 40;
const SPEC = "docs/spec/chunk-forms.md";

/** The two chunk forms under test. */
type FormKind = "gd" | "exact";

function runForm(kind: FormKind, decl: RuleDecl, inp: InnerInputs, state: State, c: ChunkCase, C: number): ChunkRun {
  return kind === "gd" ? chunkStartGdForward(decl, inp, state, c.cfg, C) : exactChunked(decl, inp, state, C);
}


/** Differentiated tensors of a case: the inner inputs the rule reads and every initial state entry. */
function inputsOf(decl: RuleDecl, c: ChunkCase): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  const unread = decl.unread?.(c.cfg) ?? [];
  for (const n of INNER_INPUT_NAMES) {
    const t = c.inp[n];
    if (t === undefined || unread.includes(n)) continue;
    if ((n === "alpha" || n === "theta" || n === "eta") && !decl.gates.includes(n)) continue;
    // An omega-writing rule (Atlas) reads v only through its gates, outside the inner pair.
    if (n === "v" && decl.matrixChunk?.write === "omega") continue;
    // x is read by the rules that declare it (Trellis); the others ignore it.
    if (n === "x" && !(decl.kernel?.extraInputs ?? []).includes("x")) continue;
    out[n] = t;
  }
  for (const [n, t] of Object.entries(c.state)) out[`state.${n}`] = t;
  return out;
}

function rebuild(c: ChunkCase, named: Record<string, Tensor>): { inp: InnerInputs; state: State } {
  const inp: Record<string, Tensor> = { ...(c.inp as unknown as Record<string, Tensor>) };
  const state: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(named)) {
    if (n.startsWith("state.")) state[n.slice(6)] = t;
    else inp[n] = t;
  }
  return { inp: inp as unknown as InnerInputs, state };
}

/** Loss of C2: sum(y ⊙ dy) + Σ_n ⟨final_n, dState_n⟩, so the final state's gradient path is checked too. */
function lossValue(r: ChunkRun, c: ChunkCase): number {
  let s = 0;
  for (let i = 0; i < r.y.size; i++) s += r.y.data[i]! * c.dy.data[i]!;
  for (const [n, t] of Object.entries(r.finalState)) for (let i = 0; i < t.size; i++) s += t.data[i]! * c.dState[n]!.data[i]!;
  return s;
}

/** The C2 loss on the tape: ⟨y, dy⟩ + Σ_n ⟨final_n, dState_n⟩ as one scalar. */
function joinLoss(r: ChunkRun, c: ChunkCase): Tensor {
  let loss = frobeniusDot([r.y, c.dy], {});
  for (const [n, t] of Object.entries(r.finalState)) loss = add([loss, frobeniusDot([t, c.dState[n]!], {})], {});
  return loss;
}

/**
 * Gradients of a form w.r.t. every differentiated tensor, of sum(y ⊙ dy) (+ the final-state term
 * when withState): the tape for the forms written in tape ops, the hand-written backward for the
 * chunk-start GD of the MLP memories, Lattice and Trellis.
 */
function formGrads(kind: FormKind, decl: RuleDecl, c: ChunkCase, C: number, withState: boolean, viaTape = false): Record<string, Float64Array> {
  const hand = kind === "gd" && !viaTape ? chunkStartGdGrads(decl, c.inp, c.state, c.cfg, C, c.dy, withState ? c.dState : undefined) : undefined;
  if (hand !== undefined) {
    const out: Record<string, Float64Array> = {};
    for (const n of Object.keys(inputsOf(decl, c))) out[n] = hand[n]!;
    return out;
  }
  return withTape((tape) => {
    const named: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(inputsOf(decl, c))) named[n] = tape.input(t);
    const { inp, state } = rebuild(c, named);
    const r = viaTape ? chunkStartGd(decl, inp, state, C) : runForm(kind, decl, inp, state, c, C);
    if (withState) tape.backward(joinLoss(r, c));
    else tape.backward(r.y, c.dy);
    const out: Record<string, Float64Array> = {};
    for (const [n, t] of Object.entries(named)) out[n] = Float64Array.from(tape.grad(t)?.data ?? new Float64Array(t.size));
    return out;
  });
}

function firstDiff(r: ChunkRun, ref: { y: Tensor; finalState: State }): string | null {
  const iy = bitwiseEqual(r.y.data, ref.y.data);
  if (iy !== -1) return `y[${iy}] = ${r.y.data[iy]}, sequential ${ref.y.data[iy]}`;
  for (const [n, t] of Object.entries(ref.finalState)) {
    const i = bitwiseEqual(r.finalState[n]!.data, t.data);
    if (i !== -1) return `final ${n}[${i}] = ${r.finalState[n]!.data[i]}, sequential ${t.data[i]}`;
  }
  return null;
}

function identityCase(decl: RuleDecl, spec: ChunkCaseSpec): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const ref = decl.inner.forward(c.inp, c.state, c.cfg);
  for (const C of writeReadsState(decl) ? [1] : GD_CURVE) {
    const bad = firstDiff(chunkStartGdForward(decl, c.inp, c.state, c.cfg, C), ref);
    if (bad !== null) return { ok: false, message: `C = ${C}: ${bad}` };
  }
  return { ok: true };
}

function rms(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i]! - b[i]!) ** 2;
  return Math.sqrt(s / Math.max(a.length, 1));
}

/** The measured curve: mean over the batch of the RMS distance of y to the sequential rule, per C. */
export function gdCurve(decl: RuleDecl, specs: readonly ChunkCaseSpec[]): number[] {
  const curve = GD_CURVE.map(() => 0);
  for (const spec of specs) {
    const c = buildChunkCase(decl, spec);
    const ref = decl.inner.forward(c.inp, c.state, c.cfg);
    GD_CURVE.forEach((C, j) => { curve[j]! += rms(chunkStartGdForward(decl, c.inp, c.state, c.cfg, C).y.data, ref.y.data) / specs.length; });
  }
  return curve;
}

/** A chunk-start GD forward at chunk size C (the rule's own; a test passes a planted one). */
export type GdForm = (decl: RuleDecl, c: ChunkCase, C: number) => { y: Tensor };

const OWN_FORM: GdForm = (decl, c, C) => chunkStartGdForward(decl, c.inp, c.state, c.cfg, C);

/**
 * The curve property (docs/spec/chunk-forms.md#chunk-start-gd-curve) over a batch of independently
 * drawn cases: by construction every case is at distance 0 at C = 1 and the batch is not at 0 at
 * C = 2; statistically, at least CURVE_NEED of the batch are farther from the sequential rule at
 * C = 16 than at C = 2 (paired, case by case). The batch-mean curve is reported, not judged.
 */
export function monotoneCase(decl: RuleDecl, specs: readonly ChunkCaseSpec[], form: GdForm = OWN_FORM): CaseOutcome {
  const curve = GD_CURVE.map(() => 0);
  let grew = 0, zeroAt1 = true;
  const shrinking: string[] = [];
  for (const spec of specs) {
    const c = buildChunkCase(decl, spec);
    const ref = decl.inner.forward(c.inp, c.state, c.cfg);
    const dist = GD_CURVE.map((C) => rms(form(decl, c, C).y.data, ref.y.data));
    dist.forEach((x, j) => { curve[j]! += x / specs.length; });
    if (dist[0] !== 0) zeroAt1 = false;
    if (dist[GD_CURVE.length - 1]! > dist[1]!) grew++;
    else if (shrinking.length < 3) shrinking.push(`seed ${spec.seed} (d ${spec.d}, s ${spec.seq_len}): C=2 ${dist[1]!.toExponential(2)}, C=16 ${dist[GD_CURVE.length - 1]!.toExponential(2)}`);
  }
  const shown = GD_CURVE.map((C, j) => `C=${C}: ${curve[j]!.toExponential(2)}`).join(", ");
  const details = { batch: specs.length, farther_at_16: grew, need: CURVE_NEED, mean_curve: Object.fromEntries(GD_CURVE.map((C, j) => [`C=${C}`, curve[j]!])) };
  if (!zeroAt1) return { ok: false, details, message: `C = 1 is not the sequential rule (batch mean ${shown})` };
  // The rule's write reads the state, so freezing it for two tokens must change y.
  if (!(curve[1]! > 0)) return { ok: false, details, message: `C = 2 equals the sequential rule: the write is not taken at the chunk start (${shown})` };
  if (grew < CURVE_NEED) {
    return { ok: false, details, message: `only ${grew} of ${specs.length} cases are farther from the sequential rule at C = 16 than at C = 2 (need ${CURVE_NEED}; e.g. ${shrinking.join("; ")}; batch mean ${shown})` };
  }
  return { ok: true, details };
}

/** A form's gradient (of sum(y ⊙ dy)) vs the rule's hand-written backward: the same function at C = 1, or always (exact). */
function againstHand(kind: FormKind, decl: RuleDecl, spec: ChunkCaseSpec, C: number): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const got = formGrads(kind, decl, c, C, false);
  const r = decl.inner.forward(c.inp, c.state, c.cfg);
  const hand = decl.inner.backward(r.saved, c.inp, c.dy, c.cfg) as Record<string, Tensor | undefined>;
  // An input the rule declares unread must have no gradient at all (a wrong declaration fails here).
  for (const n of decl.unread?.(c.cfg) ?? []) {
    const at = hand[`d${n}`]?.data.findIndex((v) => v !== 0) ?? -1;
    if (at >= 0) return { ok: false, message: `d${n}[${at}] = ${hand[`d${n}`]!.data[at]}: ${decl.key} declares ${n} unread here (unread), its gradient must be exactly 0` };
  }
  const a: Record<string, ArrayLike<number>> = {}, b: Record<string, ArrayLike<number>> = {};
  for (const n of Object.keys(inputsOf(decl, c))) {
    if (n.startsWith("state.")) continue;
    const h = hand[`d${n}`];
    if (h === undefined) continue;
    a[n] = got[n]!;
    b[n] = h.data;
  }
  return fromComparison(compareTensors(a, b, TOL_ULP));
}

/**
 * The error-writing rules' chunk-start GD in their own arithmetic against its tape form
 * (src/rules/chunk-matrix.ts): y, the final state and every gradient with the final-state term.
 */
function tapeCase(decl: RuleDecl, spec: ChunkCaseSpec, C: number): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const got: Record<string, ArrayLike<number>> = {}, want: Record<string, ArrayLike<number>> = {};
  const own = chunkStartGdForward(decl, c.inp, c.state, c.cfg, C), tape = chunkStartGd(decl, c.inp, c.state, C);
  got.y = own.y.data;
  want.y = tape.y.data;
  for (const [n, t] of Object.entries(tape.finalState)) {
    got[`final ${n}`] = own.finalState[n]!.data;
    want[`final ${n}`] = t.data;
  }
  const g = formGrads("gd", decl, c, C, true), w = formGrads("gd", decl, c, C, true, true);
  for (const n of Object.keys(w)) {
    got[`d${n}`] = g[n]!;
    want[`d${n}`] = w[n]!;
  }
  return fromComparison(compareTensors(got, want, TOL_ULP));
}

function fdCase(kind: FormKind, decl: RuleDecl, spec: ChunkCaseSpec, C: number): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const grads = formGrads(kind, decl, c, C, true);
  const named = inputsOf(decl, c);
  const loss = () => {
    const { inp, state } = rebuild(c, named);
    return lossValue(runForm(kind, decl, inp, state, c, C), c);
  };
  const ds = Object.entries(named).map(([name, tensor]) => ({ name, tensor, grad: grads[name]! }));
  return fromComparison(gradCheck(loss, ds, { fullMax: 300, directions: 3, seed: spec.seed ^ 0x2545f491 }));
}

function exactCase(decl: RuleDecl, spec: ChunkCaseSpec): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const ref = decl.inner.forward(c.inp, c.state, c.cfg);
  for (const C of EXACT_CS) {
    const r = exactChunked(decl, c.inp, c.state, C);
    const got: Record<string, ArrayLike<number>> = { y: r.y.data }, want: Record<string, ArrayLike<number>> = { y: ref.y.data };
    for (const [n, t] of Object.entries(ref.finalState)) {
      got[`final ${n}`] = r.finalState[n]!.data;
      want[`final ${n}`] = t.data;
    }
    const cmp = compareTensors(got, want, TOL_ULP);
    if (!cmp.ok) return { ...fromComparison(cmp), message: `C = ${C}: ${cmp.message}` };
  }
  return { ok: true };
}

/**
 * Hyperparameters the curve property fixes, with the measured reason: Moneta off its L2 path
 * (q != 2), the L_q normalisation rescales the state after every write, and the batch-mean distance
 * was monotone in only 7 of 20 batches (90 of 90 with q = 2), see docs/spec/chunk-forms.md#chunk-start-gd-curve
 */
const CURVE_HYPER: Readonly<Record<string, Readonly<Record<string, number>>>> = { moneta: { q: 2 } };

/**
 * The step size the curve property fixes small, per rule: θ, except for Lattice, whose write
 * scale is α (θ is unused). With α drawn from every regime the Lattice batch-mean distance was
 * monotone in 31 of 40 batches (32 of 40 at α high), 40 of 40 with α low;
 * see docs/spec/chunk-forms.md#chunk-start-gd-curve
 */
const CURVE_SMALL_STEP: Readonly<Record<string, Partial<ChunkCaseSpec>>> = { lattice: { alpha: "low" } };

/** From M_0 = 0 a single token never lets α act (the rules' checkMinimums): two tokens at least. */
const SMALL: SizeLimits = { d: [2, 5], seq_len: [2, 9] };
const LONG: SizeLimits = { d: [2, 6], seq_len: [1, 70] };
const CURVE: SizeLimits = { d: [2, 8], seq_len: [17, 40] };

/** The curve property's batch: BATCH independent draws of the curve cases from one seed. */
export function curveBatch(decl: RuleDecl, batchSeed: number): ChunkCaseSpec[] {
  const k = decl.key;
  const arb = chunkCaseArb(decl, CURVE).map((s) => ({ ...s, theta: "small" as const, ...CURVE_SMALL_STEP[k], hyper: { ...s.hyper, ...CURVE_HYPER[k] } }));
  return fc.sample(arb, { seed: batchSeed, numRuns: BATCH, unbiased: true });
}

export function chunkMatrixChecks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const decl of RULES.filter(hasChunkStartGd)) {
    const k = decl.key, subject = { rule: k, dtype: "f64" as const };
    const stateFree = !writeReadsState(decl);
    const cArb = fc.integer({ min: 1, max: 5 });
    checks.push({
      kind: "property", id: `C8/chunk-gd/${k}/c1-identity`, class: "C8", subject,
      spec: `${SPEC}#chunk-start-gd; ${decl.sheet}`,
      tolerance: { kind: "bitwise", compared: stateFree ? "y and final state, every C" : "y and final state at C = 1" },
      runs: RUNS, arb: chunkCaseArb(decl, LONG), run: (s: ChunkCaseSpec) => identityCase(decl, s),
    });
    if (!stateFree) {
      checks.push({
        kind: "property", id: `C8/chunk-gd/${k}/monotone`, class: "C8", subject,
        spec: `${SPEC}#chunk-start-gd-curve`,
        tolerance: {
          kind: "paired-sign", measure: "RMS distance of y to the sequential rule, per case", chunk_sizes: [...GD_CURVE], batch: BATCH,
          need: `at least ${CURVE_NEED} of ${BATCH} cases farther at C = 16 than at C = 2; 0 at C = 1; > 0 at C = 2`,
          false_alarm: "<= 1.8e-16 per batch", theta: "small", fixed: { ...CURVE_SMALL_STEP[k], ...CURVE_HYPER[k] },
        },
        runs: { quick: 1, default: 1, deep: 5 },
        // The batch is drawn from one seed without fast-check's bias towards small values, so its
        // cases are independent draws (the false-alarm bound counts on it).
        arb: fc.integer({ min: 0, max: 0x7fffffff }),
        run: (batchSeed: number) => monotoneCase(decl, curveBatch(decl, batchSeed)),
      });
    }
    checks.push({
      kind: "property", id: `C1/chunk-gd/${k}/backward`, class: "C1", subject,
      spec: `${SPEC}#chunk-start-gd; docs/spec/tolerances.md#backward`,
      tolerance: { kind: "ulp", ...TOL_ULP, reason: "chunk-start GD at C = 1 is the rule: its backward vs the rule's hand-written one, other summation order" },
      runs: RUNS, arb: chunkCaseArb(decl, SMALL), run: (s: ChunkCaseSpec) => againstHand("gd", decl, s, 1),
    });
    if (hasErrorChunk(decl)) {
      checks.push({
        kind: "property", id: `C1/chunk-gd/${k}/tape`, class: "C1", subject,
        spec: `${SPEC}#chunk-start-gd; docs/spec/tolerances.md#backward`,
        tolerance: { kind: "ulp", ...TOL_ULP, reason: "the rule-arithmetic form vs its tape form: the same function, other rounding order" },
        runs: RUNS, arb: fc.tuple(chunkCaseArb(decl, SMALL), cArb), run: ([s, C]: [ChunkCaseSpec, number]) => tapeCase(decl, s, C),
      });
    }
    checks.push({
      kind: "property", id: `C2/chunk-gd/${k}`, class: "C2", subject,
      spec: `${SPEC}#chunk-start-gd; docs/spec/conformance.md#c2`,
      tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, loss: "sum(y*dy) + sum(final*dState)" },
      runs: RUNS_FD, arb: fc.tuple(chunkCaseArb(decl, SMALL), cArb), run: ([s, C]: [ChunkCaseSpec, number]) => fdCase("gd", decl, s, C),
    });
    if (decl.matrixChunk === undefined) continue;
    checks.push({
      kind: "property", id: `C8/exact-chunk/${k}/sequential`, class: "C8", subject,
      spec: `${SPEC}#exact-chunked; ${decl.sheet}`,
      tolerance: { kind: "ulp", ...TOL_ULP, chunk_sizes: [...EXACT_CS], reason: "the chunk algebra reassociates the recurrence: rounding only" },
      runs: RUNS, arb: chunkCaseArb(decl, LONG), run: (s: ChunkCaseSpec) => exactCase(decl, s),
    });
    checks.push({
      kind: "property", id: `C1/exact-chunk/${k}/backward`, class: "C1", subject,
      spec: `${SPEC}#exact-chunked; docs/spec/tolerances.md#backward`,
      tolerance: { kind: "ulp", ...TOL_ULP, reason: "same function as the sequential rule: its gradient differs by rounding only" },
      runs: RUNS, arb: fc.tuple(chunkCaseArb(decl, LONG), fc.constantFrom(...EXACT_CS)),
      run: ([s, C]: [ChunkCaseSpec, number]) => againstHand("exact", decl, s, C),
    });
    checks.push({
      kind: "property", id: `C2/exact-chunk/${k}`, class: "C2", subject,
      spec: `${SPEC}#exact-chunked; docs/spec/conformance.md#c2`,
      tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, loss: "sum(y*dy) + sum(final*dState)" },
      runs: RUNS_FD, arb: fc.tuple(chunkCaseArb(decl, SMALL), cArb), run: ([s, C]: [ChunkCaseSpec, number]) => fdCase("exact", decl, s, C),
    });
  }
  return checks;
}
