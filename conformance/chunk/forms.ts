/**
 * Checks of the matrix family's chunk forms (docs/spec/chunk-forms.md), generated for every rule
 * that declares `matrixChunk`:
 *   C8/chunk-gd/<rule>/c1-identity   chunk-start GD with C = 1 is the sequential forward, bitwise
 *                                    (state-free writes: bitwise for every C)
 *   C8/chunk-gd/<rule>/monotone      mean distance to sequential over a batch, C = 1, 2, 4, 8, 16:
 *                                    0 at C = 1, then non-decreasing (state-dependent writes)
 *   C1/chunk-gd/<rule>/backward      tape gradient of the C = 1 step form vs the hand-written backward
 *   C2/chunk-gd/<rule>               tape gradient of chunk-start GD vs finite differences
 *   C8/exact-chunk/<rule>/sequential exact chunked form vs sequential forward, every listed C
 *   C1/exact-chunk/<rule>/backward   its tape gradient vs the sequential hand-written backward
 *   C2/exact-chunk/<rule>            its tape gradient vs finite differences
 */
import * as fc from "fast-check";
import { bitwiseEqual, compareTensors, TOL_FD, TOL_ULP } from "../../oracle/compare.ts";
import { FD_METHOD } from "../../oracle/fd.ts";
import { gradCheck } from "../../oracle/gradcheck.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type Profile } from "../../harness/check.ts";
import { chunkStartGd, exactChunked, type ChunkRun } from "../../src/rules/chunk-matrix.ts";
import { add, frobeniusDot } from "../../src/ops/index.ts";
import { RULES } from "../../src/rules/index.ts";
import type { InnerInputs, RuleDecl, State } from "../../src/rules/types.ts";
import { withTape } from "../../src/tape.ts";
import type { Tensor } from "../../src/tensor.ts";
import { buildChunkCase, chunkCaseArb, type ChunkCase, type ChunkCaseSpec } from "../../cases/chunk-case.ts";

const RUNS: Record<Profile, number> = { quick: 3, default: 10, deep: 100 };
const RUNS_FD: Record<Profile, number> = { quick: 3, default: 8, deep: 80 };
const GD_CURVE = [1, 2, 4, 8, 16] as const;
const EXACT_CS = [1, 2, 4, 8, 16, 64] as const;
const BATCH = 8;
const SPEC = "docs/spec/chunk-forms.md";

type Form = (decl: RuleDecl, inp: InnerInputs, state: State, C: number) => ChunkRun;

const INPUT_NAMES = ["k", "v", "q", "alpha", "theta", "eta", "omega"] as const;

/** Differentiated tensors of a case: the inner inputs the rule reads and every initial state entry. */
function inputsOf(decl: RuleDecl, c: ChunkCase): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const n of INPUT_NAMES) {
    const t = c.inp[n];
    if (t === undefined) continue;
    if ((n === "alpha" || n === "theta" || n === "eta") && !decl.gates.includes(n)) continue;
    // An omega-writing rule (Atlas) reads v only through its gates, outside the inner pair.
    if (n === "v" && decl.matrixChunk?.write === "omega") continue;
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
function lossValue(r: ChunkRun, c: ChunkCase, withState: boolean): number {
  let s = 0;
  for (let i = 0; i < r.y.size; i++) s += r.y.data[i]! * c.dy.data[i]!;
  if (withState) {
    for (const [n, t] of Object.entries(r.finalState)) for (let i = 0; i < t.size; i++) s += t.data[i]! * c.dState[n]!.data[i]!;
  }
  return s;
}

/** Tape gradients of sum(y ⊙ dy) w.r.t. every differentiated tensor. */
function tapeGradsOf(form: Form, decl: RuleDecl, c: ChunkCase, C: number): Record<string, Float64Array> {
  return withTape((tape) => {
    const named: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(inputsOf(decl, c))) named[n] = tape.input(t);
    const { inp, state } = rebuild(c, named);
    const r = form(decl, inp, state, C);
    tape.backward(r.y, c.dy);
    const out: Record<string, Float64Array> = {};
    for (const [n, t] of Object.entries(named)) out[n] = Float64Array.from(tape.grad(t)?.data ?? new Float64Array(t.size));
    return out;
  });
}

function cfgOf(c: ChunkCase): { d: number; seq_len: number } {
  return { d: c.inp.k.shape[1]!, seq_len: c.inp.k.shape[0]! };
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
  const ref = decl.inner.forward(c.inp, c.state, cfgOf(c));
  const stateFree = decl.matrixChunk!.write !== "error";
  for (const C of stateFree ? GD_CURVE : [1]) {
    const bad = firstDiff(chunkStartGd(decl, c.inp, c.state, C), ref);
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
    const ref = decl.inner.forward(c.inp, c.state, cfgOf(c));
    GD_CURVE.forEach((C, j) => { curve[j]! += rms(chunkStartGd(decl, c.inp, c.state, C).y.data, ref.y.data) / specs.length; });
  }
  return curve;
}

function monotoneCase(decl: RuleDecl, specs: ChunkCaseSpec[]): CaseOutcome {
  const curve = gdCurve(decl, specs);
  const shown = GD_CURVE.map((C, j) => `C=${C}: ${curve[j]!.toExponential(2)}`).join(", ");
  if (curve[0] !== 0) return { ok: false, message: `C = 1 is not the sequential rule (${shown})` };
  // The rule's write reads the state, so freezing it for two tokens must change y.
  if (!(curve[1]! > 0)) return { ok: false, message: `C = 2 equals the sequential rule: the write is not taken at the chunk start (${shown})` };
  for (let j = 1; j < curve.length; j++) {
    if (curve[j]! < curve[j - 1]!) return { ok: false, message: `distance falls from C=${GD_CURVE[j - 1]} to C=${GD_CURVE[j]} (${shown})` };
  }
  return { ok: true };
}

/** The step form at C = 1 on the tape vs the rule's hand-written backward (same function, other order). */
function gdBackwardCase(decl: RuleDecl, spec: ChunkCaseSpec): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const got = tapeGradsOf(chunkStartGd, decl, c, 1);
  return againstHand(decl, c, got);
}

function againstHand(decl: RuleDecl, c: ChunkCase, got: Record<string, Float64Array>): CaseOutcome {
  const cfg = cfgOf(c);
  const r = decl.inner.forward(c.inp, c.state, cfg);
  const hand = decl.inner.backward(r.saved, c.inp, c.dy, cfg) as Record<string, Tensor | undefined>;
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

function fdCase(form: Form, decl: RuleDecl, spec: ChunkCaseSpec, C: number): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const grads = tapeGradsWithState(form, decl, c, C);
  const named = inputsOf(decl, c);
  const loss = () => {
    const { inp, state } = rebuild(c, named);
    return lossValue(form(decl, inp, state, C), c, true);
  };
  const ds = Object.entries(named).map(([name, tensor]) => ({ name, tensor, grad: grads[name]! }));
  return fromComparison(gradCheck(loss, ds, { fullMax: 300, directions: 3, seed: spec.seed ^ 0x2545f491 }));
}

/** Gradients of sum(y ⊙ dy) + Σ⟨final, dState⟩: y and the final state joined into one output. */
function tapeGradsWithState(form: Form, decl: RuleDecl, c: ChunkCase, C: number): Record<string, Float64Array> {
  return withTape((tape) => {
    const named: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(inputsOf(decl, c))) named[n] = tape.input(t);
    const { inp, state } = rebuild(c, named);
    const r = form(decl, inp, state, C);
    const loss = joinLoss(r, c);
    tape.backward(loss);
    const out: Record<string, Float64Array> = {};
    for (const [n, t] of Object.entries(named)) out[n] = Float64Array.from(tape.grad(t)?.data ?? new Float64Array(t.size));
    return out;
  });
}

function exactCase(decl: RuleDecl, spec: ChunkCaseSpec): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  const ref = decl.inner.forward(c.inp, c.state, cfgOf(c));
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

function exactBackwardCase(decl: RuleDecl, spec: ChunkCaseSpec, C: number): CaseOutcome {
  const c = buildChunkCase(decl, spec);
  return againstHand(decl, c, tapeGradsOf(exactChunked, decl, c, C));
}

/** The C2 loss on the tape: ⟨y, dy⟩ + Σ_n ⟨final_n, dState_n⟩ as one scalar. */
function joinLoss(r: ChunkRun, c: ChunkCase): Tensor {
  let loss = frobeniusDot([r.y, c.dy], {});
  for (const [n, t] of Object.entries(r.finalState)) loss = add([loss, frobeniusDot([t, c.dState[n]!], {})], {});
  return loss;
}

/** From M_0 = 0 a single token never lets α act (the rules' checkMinimums): two tokens at least. */
const SMALL = { d: [2, 5] as [number, number], seq_len: [2, 9] as [number, number] };
const LONG = { d: [2, 6] as [number, number], seq_len: [1, 70] as [number, number] };
const CURVE = { d: [2, 8] as [number, number], seq_len: [17, 40] as [number, number] };

export function chunkMatrixChecks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const decl of RULES.filter((r) => r.matrixChunk !== undefined)) {
    const k = decl.key, subject = { rule: k };
    const stateFree = decl.matrixChunk!.write !== "error";
    const cArb = fc.integer({ min: 1, max: 5 });
    checks.push({
      kind: "property", id: `C8/chunk-gd/${k}/c1-identity`, class: "C8", subject,
      spec: `${SPEC}#chunk-start-gd; ${decl.sheet}`,
      tolerance: { kind: "bitwise", compared: stateFree ? "y and final state, every C" : "y and final state at C = 1" },
      runs: RUNS, arb: chunkCaseArb(LONG), run: (s: ChunkCaseSpec) => identityCase(decl, s),
    });
    if (!stateFree) {
      checks.push({
        kind: "property", id: `C8/chunk-gd/${k}/monotone`, class: "C8", subject,
        spec: `${SPEC}#chunk-start-gd-curve`,
        tolerance: { kind: "monotone", measure: `mean over ${BATCH} cases of the RMS distance of y`, chunk_sizes: [...GD_CURVE], theta: "small" },
        runs: { quick: 1, default: 3, deep: 20 },
        arb: fc.array(chunkCaseArb(CURVE).map((s) => ({ ...s, theta: "small" as const })), { minLength: BATCH, maxLength: BATCH }),
        run: (specs: ChunkCaseSpec[]) => monotoneCase(decl, specs),
      });
    }
    checks.push({
      kind: "property", id: `C1/chunk-gd/${k}/backward`, class: "C1", subject,
      spec: `${SPEC}#chunk-start-gd; docs/spec/tolerances.md#backward`,
      tolerance: { kind: "ulp", ...TOL_ULP, reason: "step form on the tape vs hand-written backward: same function, other summation order" },
      runs: RUNS, arb: chunkCaseArb(SMALL), run: (s: ChunkCaseSpec) => gdBackwardCase(decl, s),
    });
    checks.push({
      kind: "property", id: `C2/chunk-gd/${k}`, class: "C2", subject,
      spec: `${SPEC}#chunk-start-gd; docs/spec/conformance.md#c2`,
      tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, loss: "sum(y*dy) + sum(final*dState)" },
      runs: RUNS_FD, arb: fc.tuple(chunkCaseArb(SMALL), cArb), run: ([s, C]: [ChunkCaseSpec, number]) => fdCase(chunkStartGd, decl, s, C),
    });
    checks.push({
      kind: "property", id: `C8/exact-chunk/${k}/sequential`, class: "C8", subject,
      spec: `${SPEC}#exact-chunked; ${decl.sheet}`,
      tolerance: { kind: "ulp", ...TOL_ULP, chunk_sizes: [...EXACT_CS], reason: "the chunk algebra reassociates the recurrence: rounding only" },
      runs: RUNS, arb: chunkCaseArb(LONG), run: (s: ChunkCaseSpec) => exactCase(decl, s),
    });
    checks.push({
      kind: "property", id: `C1/exact-chunk/${k}/backward`, class: "C1", subject,
      spec: `${SPEC}#exact-chunked; docs/spec/tolerances.md#backward`,
      tolerance: { kind: "ulp", ...TOL_ULP, reason: "same function as the sequential rule: its gradient differs by rounding only" },
      runs: RUNS, arb: fc.tuple(chunkCaseArb(LONG), fc.constantFrom(...EXACT_CS)),
      run: ([s, C]: [ChunkCaseSpec, number]) => exactBackwardCase(decl, s, C),
    });
    checks.push({
      kind: "property", id: `C2/exact-chunk/${k}`, class: "C2", subject,
      spec: `${SPEC}#exact-chunked; docs/spec/conformance.md#c2`,
      tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, loss: "sum(y*dy) + sum(final*dState)" },
      runs: RUNS_FD, arb: fc.tuple(chunkCaseArb(SMALL), cArb), run: ([s, C]: [ChunkCaseSpec, number]) => fdCase(exactChunked, decl, s, C),
    });
  }
  return checks;
}
