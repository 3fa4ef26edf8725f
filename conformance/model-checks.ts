/**
 * C3, model C2, C4 and C7 for the MAG + CMS model (docs/spec/conformance.md; docs/spec/titans-family.md#frozen-reads, docs/spec/titans-family.md#swa, docs/spec/titans-family.md#mag, docs/spec/titans-family.md#cms;
 * docs/spec/decisions.md#d10, docs/spec/decisions.md#d11, docs/spec/decisions.md#d12, docs/spec/decisions.md#d13). Generated from the rule registry and k ∈ {1, 2, 4}: nothing here is per rule.
 */
import * as fc from "fast-check";
import { cmsForward, cmsStep } from "../oracle/cms-backward.ts";
import { bitwiseEqual, compareTensors, emptyWorst, TOL_FD, TOL_ULP, VACUITY_FACTOR, worse, type Comparison, type Worst } from "../oracle/compare.ts";
import { FD_METHOD } from "../oracle/fd.ts";
import { gradCheck } from "../oracle/gradcheck.ts";
import type { CaseOutcome, CheckDef, Profile } from "../harness/check.ts";
import { runBuild, type BuildStepRecord } from "../src/model/build.ts";
import { buildModelCase, chunkSizesFor, type ContextKind, type ModelCase, type ModelCaseSpec } from "../cases/model-case.ts";
import { Conductor, pulseAt } from "../src/model/conductor.ts";
import {
  DEFAULT_FREQ_THRESHOLD, MODEL_PARAMS, levelParamNames, type FreqSchedule, type Model, type MemoryRuleKey,
} from "../src/model/config.ts";
import { magForward } from "../src/model/mag.ts";
import { cloneParams, sgdInPlace, type ModelParams } from "../src/model/params.ts";
import { tapeParams, tapeStep, type StepResult, type Stepper } from "../src/model/step.ts";
import { add, crossEntropy, matmul, matmulTransposeB, mul, scale, sigmoid } from "../src/ops/index.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { usedParams } from "../src/rules/level.ts";
import { MEMORY_RULES } from "../src/rules/index.ts";
import { withTape } from "../src/tape.ts";
import { Tensor, clone, type Data } from "../src/tensor.ts";
import { ruleCaseSpecArb } from "../cases/rule-case.ts";
import { maxAbs } from "../src/numeric.ts";

const RUNS_C3: Record<Profile, number> = { quick: 1, default: 3, deep: 30 };
const RUNS_C4: Record<Profile, number> = { quick: 1, default: 2, deep: 20 };
const RUNS_C2: Record<Profile, number> = { quick: 1, default: 2, deep: 20 };
const RUNS_GATE: Record<Profile, number> = { quick: 1, default: 3, deep: 30 };
const KS = [1, 2, 4] as const;
/** Above this many parameter elements the model C2 uses random directions. */
const FULL_FD_MAX = 260;
const DIRECTIONS = 3;
const LR = 0.01;
/** C7: the build-loop trajectories after step 0 (ULP-level parameter differences grow a little). */
const TRAJECTORY_RTOL = 1e-12;

const SPEC_C3 = "docs/spec/conformance.md#c3; docs/spec/titans-family.md#mag-backward, docs/spec/titans-family.md#cms-combine, docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d11, docs/spec/decisions.md#d12, docs/spec/decisions.md#d13";

// ── cases ───────────────────────────────────────────────────────────────────

interface Sizes {
  readonly d: [number, number];
  readonly seq_len: [number, number];
  readonly vocab: [number, number];
}

/** The issue's bounds: d <= 8, seq_len <= 8, vocab <= 16 (d = 1 makes row-normalised keys constant). */
const SIZES: Sizes = { d: [2, 8], seq_len: [3, 8], vocab: [3, 16] };
/** Full finite differences need tiny shapes. */
const TINY: Sizes = { d: [2, 4], seq_len: [2, 4], vocab: [3, 5] };

function hyperArb(rule: MemoryRuleKey): fc.Arbitrary<Record<string, number | string>> {
  return ruleCaseSpecArb(ruleByKey(rule)).map((s) => ({ ...s.hyper }));
}

function divisorsUpTo4(d: number): number[] {
  return [1, 2, 3, 4].filter((h) => d % h === 0);
}

/**
 * Case specs for a list of level rules. The context is each rule's random valid state: a
 * frozen level reading the D4 init of a zero-init rule reads zero, and the MLP rules' hash init
 * is small enough to push their gradients to ~1e-10.
 */
function specArb(rules: fc.Arbitrary<MemoryRuleKey[]>, sizes: Sizes, freq: FreqSchedule,
  context: ContextKind = "random"): fc.Arbitrary<ModelCaseSpec> {
  return fc.record({
    d: fc.integer({ min: sizes.d[0], max: sizes.d[1] }),
    seq_len: fc.integer({ min: sizes.seq_len[0], max: sizes.seq_len[1] }),
    vocab: fc.integer({ min: sizes.vocab[0], max: sizes.vocab[1] }),
    headPick: fc.nat({ max: 3 }),
    window: fc.integer({ min: 2, max: 9 }),
    pad: fc.boolean(),
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
    levels: rules.chain((rs) => fc.tuple(...rs.map((r) => hyperArb(r).map((hyper) => ({ rule: r, hyper }))))),
  }).map(({ headPick, ...s }) => {
    const hs = divisorsUpTo4(s.d);
    return { ...s, heads: hs[headPick % hs.length]!, freq, context };
  });
}

const sameRule = (rule: MemoryRuleKey, k: number) => fc.constant(Array.from({ length: k }, () => rule));
const mixedRules = (k: number) => fc.array(fc.constantFrom(...MEMORY_RULES), { minLength: k, maxLength: k });

interface Pattern {
  readonly name: string;
  readonly active: readonly boolean[];
}

/** All active; each non-zero level frozen; for k = 4 the Conductor's pulses at steps 1, 8 and 64 (step 0 = all active). */
function patterns(k: number): Pattern[] {
  const out: Pattern[] = [{ name: "all-active", active: Array.from({ length: k }, () => true) }];
  for (let l = 1; l < k; l++) out.push({ name: `frozen-${l}`, active: Array.from({ length: k }, (_, i) => i !== l) });
  if (k === 4) for (const n of [1, 8, 64]) out.push({ name: `step-${n}`, active: pulseAt(n, chunkSizesFor(4)).active });
  return out;
}

type Subject = { rule: string; k: number; frozen: boolean };

/** Every (subject, k, pattern) the model checks cover: each rule alone, and levels mixing rules. */
interface Target {
  readonly key: string;
  readonly subject: (k: number, p: Pattern) => Subject;
  readonly rules: (k: number) => fc.Arbitrary<MemoryRuleKey[]>;
}

function targets(): Target[] {
  const out: Target[] = MEMORY_RULES.map((rule) => ({
    key: rule as string,
    subject: (k: number, p: Pattern) => ({ rule, k, frozen: p.active.some((a) => !a) }),
    rules: (k: number) => sameRule(rule, k),
  }));
  out.push({ key: "mixed", subject: (k, p) => ({ rule: "mixed", k, frozen: p.active.some((a) => !a) }), rules: mixedRules });
  return out;
}

const outcome = (r: Comparison): CaseOutcome => ({ ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message });


function firstNonZero(t: ArrayLike<number>): number {
  for (let i = 0; i < t.length; i++) if (t[i] !== 0) return i;
  return -1;
}

/** Gradient names of a level that must carry gradient: the rule's used ones, plus the gate's. */
function levelGradNames(model: Model, l: number): string[] {
  const used = usedParams(model.levels[l]!.decl);
  return model.spec.freq.kind === "learned" ? [...used, "w_freq", "b_freq"] : used;
}

// ── C3: tape vs the hand-written model backward ─────────────────────────────

/**
 * Compares two steps of the same case: loss bitwise, decisions equal, every gradient that must
 * carry signal within tol (with the vacuity rule), every other one exactly zero on both sides,
 * and the error buffers.
 */
function compareSteps(model: Model, got: StepResult, want: StepResult, tol = TOL_ULP): Comparison {
  const fail = (message: string): Comparison => ({ ok: false, vacuous: false, worst: emptyWorst(), message });
  if (bitwiseEqual([got.loss], [want.loss]) !== -1) return fail(`loss differs: tape ${got.loss}, hand-written ${want.loss}`);
  if (got.active.join() !== want.active.join()) return fail(`active levels differ: tape [${got.active}], hand-written [${want.active}]`);
  const a: Record<string, ArrayLike<number>> = {}, b: Record<string, ArrayLike<number>> = {};
  for (const n of MODEL_PARAMS) {
    a[n] = got.grads.model[n].data;
    b[n] = want.grads.model[n].data;
  }
  for (let l = 0; l < model.k; l++) {
    const compared = new Set(want.active[l] ? levelGradNames(model, l) : model.spec.freq.kind === "learned" ? ["w_freq", "b_freq"] : []);
    for (const n of levelParamNames(model, l)) {
      const ga = got.grads.levels[l]![n]!.data, gb = want.grads.levels[l]![n]!.data;
      if (compared.has(n)) {
        a[`L${l}.${n}`] = ga;
        b[`L${l}.${n}`] = gb;
      } else {
        const i = firstNonZero(ga), j = firstNonZero(gb);
        if (i !== -1 || j !== -1) {
          return fail(`level ${l} ${n}: must get no step gradient (${want.active[l] ? "unused by the rule" : "frozen: routed to the error buffer"}), tape[${i}], hand-written[${j}]`);
        }
      }
    }
    const bufA = got.buffers[l]!, bufB = want.buffers[l]!;
    const keys = Object.keys(bufB).sort().join();
    if (Object.keys(bufA).sort().join() !== keys) return fail(`error buffer ${l}: tape {${Object.keys(bufA)}}, hand-written {${keys}}`);
    for (const n of Object.keys(bufB)) {
      a[`buffer${l}.${n}`] = bufA[n]!.data;
      b[`buffer${l}.${n}`] = bufB[n]!.data;
    }
  }
  return compareTensors(a, b, tol);
}

function c3Case(spec: ModelCaseSpec, p: Pattern): CaseOutcome {
  const c = buildModelCase(spec);
  const got = tapeStep(c.model, c.params, c.batch, p.active, c.context);
  const want = cmsStep(c.model, c.params, c.batch, p.active, c.context);
  return outcome(compareSteps(c.model, got, want));
}

// ── model C2: tape vs finite differences of the model loss ──────────────────

interface Differentiated {
  readonly name: string;
  readonly group: string;
  readonly tensor: Tensor;
  readonly grad: Tensor;
}

/** The parameters the loss depends on, with the tape's gradient (a frozen W_Q's is its buffer). */
function differentiated(c: ModelCase, r: StepResult): Differentiated[] {
  const out: Differentiated[] = MODEL_PARAMS.map((n) => ({ name: n, group: "model", tensor: c.params.model[n], grad: r.grads.model[n] }));
  c.model.levels.forEach((_, l) => {
    const names = r.active[l] ? levelGradNames(c.model, l) : ["W_Q"];
    for (const n of names) {
      const grad = r.active[l] ? r.grads.levels[l]![n]! : r.buffers[l]![n]!;
      out.push({ name: `L${l}.${n}`, group: `level ${l}`, tensor: c.params.levels[l]![n]!, grad });
    }
  });
  return out;
}

/**
 * Vacuity per group: the model's own parameters, and each level, must each carry a gradient of
 * at least VACUITY_FACTOR·atol. Single gate tensors may be smaller (the MLP rules' theta
 * gradients are ~1e-7 at these scales) and are still compared at rtol/atol.
 */
function groupVacuity(ds: readonly Differentiated[]): string | null {
  const groups = new Map<string, number>();
  for (const d of ds) groups.set(d.group, Math.max(groups.get(d.group) ?? 0, maxAbs(d.grad.data)));
  const flat = [...groups].filter(([, m]) => m < VACUITY_FACTOR * TOL_FD.atol);
  return flat.length === 0 ? null : `near-zero gradients: ${flat.map(([g, m]) => `${g} (max |grad| ${m.toExponential(2)})`).join(", ")}`;
}

function c2Case(spec: ModelCaseSpec, p: Pattern): CaseOutcome {
  const c = buildModelCase(spec);
  const r = tapeStep(c.model, c.params, c.batch, p.active, c.context);
  const ds = differentiated(c, r);
  const loss = () => magForward(c.model, c.params, c.batch, p.active, c.context).loss.data[0]!;
  // Vacuity is judged per group below, so the per-tensor floor is off.
  const cmp = gradCheck(loss, ds.map((d) => ({ name: d.name, tensor: d.tensor, grad: d.grad.data })),
    { fullMax: FULL_FD_MAX, directions: DIRECTIONS, seed: spec.seed ^ 0x2545f491, floor: 0 });
  if (!cmp.ok) return outcome(cmp);
  const flat = groupVacuity(ds);
  return flat === null ? { ok: true, worst: cmp.worst } : { ok: false, vacuous: true, worst: cmp.worst, message: flat };
}

// ── C4: traced vs untraced forward ──────────────────────────────────────────

function c4Case(spec: ModelCaseSpec, p: Pattern): CaseOutcome {
  for (const dtype of ["f64", "f32"] as const) {
    const c = buildModelCase(spec, dtype);
    const plain = magForward(c.model, c.params, c.batch, p.active, c.context);
    const { out: traced, entries } = withTape((tape) => {
      const out = magForward(c.model, tapeParams(tape, c.params), c.batch, p.active, c.context);
      return { out, entries: tape.length };
    });
    // SWA and every level are opaque blocks, plus at least the embedding and the loss.
    if (entries < c.model.k + 3) return { ok: false, message: `${dtype}: the traced forward recorded only ${entries} tape entries` };
    const diffs: string[] = [];
    const cmp = (what: string, x: ArrayLike<number>, y: ArrayLike<number>) => {
      const i = bitwiseEqual(x, y);
      if (i !== -1) diffs.push(`${what}[${i}]: traced ${x[i]}, untraced ${y[i]}`);
    };
    cmp("loss", traced.loss.data, plain.loss.data);
    plain.levelOutputs.forEach((y, l) => cmp(`y_${l}`, traced.levelOutputs[l]!.data, y.data));
    plain.context.forEach((ctx, l) => {
      for (const [n, t] of Object.entries(ctx)) cmp(`context ${l} ${n}`, traced.context[l]![n]!.data, t.data);
    });
    if (diffs.length > 0) return { ok: false, message: `${dtype}: ${diffs.slice(0, 3).join("; ")}` };
    if (!Number.isFinite(plain.loss.data[0]!)) return { ok: false, message: `${dtype}: loss is ${plain.loss.data[0]}` };
    const flat = plain.levelOutputs.findIndex((y) => maxAbs(y.data) === 0);
    if (flat !== -1) return { ok: false, vacuous: true, message: `${dtype}: level ${flat}'s output is all zero, the comparison proves little` };
  }
  return { ok: true };
}

// ── C7: CMS semantics ───────────────────────────────────────────────────────

/** Pulse schedule over 600 steps: level l active iff n % C_l == 0, observe-then-advance. */
function pulseSchedule(k: number): CaseOutcome {
  const chunks = chunkSizesFor(k);
  const conductor = new Conductor(chunks);
  const fired = chunks.map(() => [] as number[]);
  for (let n = 0; n < 600; n++) {
    const p = conductor.pulse();
    const again = conductor.pulse();
    if (p.step !== n || again.step !== n || p.active.join() !== again.active.join()) {
      return { ok: false, message: `step ${n}: reading the pulse changed it (step ${p.step} then ${again.step})` };
    }
    for (let l = 0; l < k; l++) {
      if (p.active[l] !== (n % chunks[l]! === 0)) return { ok: false, message: `step ${n} level ${l}: active = ${p.active[l]}, C = ${chunks[l]}` };
      if (p.active[l]) fired[l]!.push(n);
    }
    conductor.advance();
  }
  for (let l = 0; l < k; l++) {
    const want = Math.ceil(600 / chunks[l]!);
    if (fired[l]!.length !== want) return { ok: false, message: `level ${l} fired ${fired[l]!.length} times in 600 steps, expected ${want}` };
  }
  // The sheet's examples (§9.1): k=2 level 1 at 0, 8, 16, ...; k=4 level 3 at 0 and 512.
  if (k === 2 && fired[1]!.slice(0, 3).join() !== "0,8,16") return { ok: false, message: `k=2 level 1 fired at ${fired[1]!.slice(0, 3)}` };
  if (k === 4 && fired[3]!.join() !== "0,512") return { ok: false, message: `k=4 level 3 fired at ${fired[3]}` };
  return { ok: true };
}

/**
 * Error buffers over a build loop (D13): while a level is frozen its step gradient is zero, its
 * parameters do not move and its buffer is the running sum of its W_Q gradients; at its next
 * active step the step's own gradient is applied, then the buffer, then the buffer is empty.
 */
function errorBufferCase(spec: ModelCaseSpec, steps: number, stepper: Stepper): CaseOutcome {
  const c = buildModelCase(spec);
  const params = cloneParams(c.params);
  const k = c.model.k;
  const running: (Record<string, Tensor> | null)[] = Array.from({ length: k }, () => null);
  let before = cloneParams(params);
  let applications = 0, accumulated = 0;
  let failure: string | null = null;
  let worstBuf = 0;
  const onStep = (rec: BuildStepRecord) => {
    if (failure !== null) return;
    const r = rec.result;
    for (let l = 0; l < k && failure === null; l++) {
      const expectActive = rec.step % c.model.spec.chunk_sizes[l]! === 0;
      if (r.active[l] !== expectActive) failure = `step ${rec.step} level ${l}: active = ${r.active[l]}, expected ${expectActive}`;
      else if (!r.active[l]) {
        accumulated++;
        const g = r.buffers[l]!.W_Q;
        if (g === undefined) failure = `step ${rec.step} level ${l}: frozen, but no W_Q gradient for the buffer`;
        else {
          worstBuf = Math.max(worstBuf, maxAbs(g.data));
          const sum = running[l] ?? { W_Q: new Tensor(g.dtype, g.shape) };
          for (let i = 0; i < g.size; i++) sum.W_Q!.data[i] = sum.W_Q!.data[i]! + g.data[i]!;
          running[l] = sum;
          const buf = rec.buffers.content(l).W_Q;
          if (buf === undefined || bitwiseEqual(buf.data, sum.W_Q!.data) !== -1) failure = `step ${rec.step} level ${l}: the buffer is not the sum of the frozen steps' W_Q gradients`;
          // Frozen steps since the level was last active.
          else if (rec.buffers.steps(l) !== rec.step % c.model.spec.chunk_sizes[l]!) failure = `step ${rec.step} level ${l}: ${rec.buffers.steps(l)} steps accumulated`;
          for (const [n, t] of Object.entries(rec.params.levels[l]!)) {
            if (failure === null && bitwiseEqual(t.data, before.levels[l]![n]!.data) !== -1) failure = `step ${rec.step} level ${l}: frozen parameter ${n} moved`;
          }
        }
      } else {
        // Expected: p − lr·g (the step), then − lr·buffer when one was pending.
        const pending = running[l];
        const want: Record<string, Tensor> = {};
        for (const [n, t] of Object.entries(before.levels[l]!)) {
          const w = clone(t);
          sgdInPlace(w, r.grads.levels[l]![n]!, LR);
          if (pending !== null && pending[n] !== undefined) sgdInPlace(w, pending[n]!, LR);
          want[n] = w;
        }
        for (const [n, w] of Object.entries(want)) {
          if (failure === null && bitwiseEqual(rec.params.levels[l]![n]!.data, w.data) !== -1) {
            failure = `step ${rec.step} level ${l}: ${n} is not p − lr·grad${pending !== null ? " − lr·buffer" : ""}`;
          }
        }
        if (pending !== null) {
          applications++;
          if (!rec.applied.includes(l)) failure = `step ${rec.step} level ${l}: a pending buffer was not applied`;
          if (rec.buffers.steps(l) !== 0 || Object.keys(rec.buffers.content(l)).length !== 0) failure = `step ${rec.step} level ${l}: buffer not reset after applying`;
          running[l] = null;
        }
      }
    }
    before = cloneParams(rec.params);
  };
  runBuild(c.model, params, c.batch, c.context, { steps, lr: LR, stepper, onStep });
  if (failure !== null) return { ok: false, message: failure };
  if (applications === 0 || accumulated === 0) return { ok: false, vacuous: true, message: `no buffer was filled and applied in ${steps} steps` };
  if (worstBuf === 0) return { ok: false, vacuous: true, message: "every buffered W_Q gradient was zero" };
  return { ok: true, message: `${accumulated} frozen level-steps buffered, ${applications} buffers applied` };
}

/** The same 10-step loop on the tape path and the hand-written path: losses bitwise at step 0, then within TRAJECTORY_RTOL. */
function trajectoryCase(spec: ModelCaseSpec, steps: number): CaseOutcome {
  const c = buildModelCase(spec);
  const run = (stepper: Stepper) => {
    const actives: string[] = [];
    const r = runBuild(c.model, cloneParams(c.params), c.batch, c.context, {
      steps, lr: LR, stepper, onStep: (rec) => actives.push(rec.result.active.map(Number).join("")),
    });
    return { losses: r.losses, actives };
  };
  const tape = run(tapeStep), hand = run(cmsStep);
  if (bitwiseEqual([tape.losses[0]!], [hand.losses[0]!]) !== -1) return { ok: false, message: `step 0: tape ${tape.losses[0]}, hand-written ${hand.losses[0]}` };
  let worst: Worst = emptyWorst();
  for (let n = 0; n < steps; n++) {
    if (tape.actives[n] !== hand.actives[n]) return { ok: false, message: `step ${n}: active levels ${tape.actives[n]} vs ${hand.actives[n]}` };
    const a = tape.losses[n]!, b = hand.losses[n]!;
    const abs = Math.abs(a - b), rel = abs / Math.abs(b);
    if (abs > worst.abs) worst = { abs, rel, tensor: "loss", index: n };
    if (!(rel <= TRAJECTORY_RTOL)) return { ok: false, worst, message: `step ${n}: tape loss ${a}, hand-written ${b} (relative ${rel.toExponential(3)})` };
  }
  if (new Set(tape.losses).size < 2) return { ok: false, vacuous: true, worst, message: "the loss never changed: the loop did not train" };
  return { ok: true, worst };
}

/**
 * The learned gate (D10): the tape's gradients equal the hand-written surrogate, and the surrogate
 * has the true sign: db_freq_l / (g_l (1 − g_l)) equals the finite-difference derivative of the
 * loss w.r.t. a multiplier on level l's output (computed here from the level outputs, untraced).
 */
function learnedGateCase(spec: ModelCaseSpec): CaseOutcome {
  let worst: Worst = emptyWorst();
  for (const sign of [1, -1]) {
    const r = learnedGateOnce(spec, sign);
    if (!r.ok) return r;
    if (r.worst !== undefined) worst = worse(worst, r.worst);
  }
  return { ok: true, worst };
}

function learnedGateOnce(spec: ModelCaseSpec, sign: number): CaseOutcome {
  const c = withGateBiases(buildModelCase(spec), sign);
  const pulse = c.model.levels.map(() => true);
  const got = tapeStep(c.model, c.params, c.batch, pulse, c.context);
  const want = cmsStep(c.model, c.params, c.batch, pulse, c.context);
  const cmp = compareSteps(c.model, got, want);
  if (!cmp.ok) return outcome(cmp);
  const k = c.model.k;
  const expected = c.model.levels.map((_, l) => l === 0 || (l < 3 ? (l === 1) === (sign > 0) : got.gates![l]! > DEFAULT_FREQ_THRESHOLD));
  if (got.active.join() !== expected.join()) return { ok: false, message: `gate decisions [${got.active}], expected [${expected}] from g = [${got.gates}]` };
  const cache = cmsForward(c.model, c.params, c.batch, pulse, c.context);
  const gates = got.gates!;
  const fd: Record<string, ArrayLike<number>> = {}, tape: Record<string, ArrayLike<number>> = {};
  for (let l = 0; l < k; l++) {
    const g = gates[l]!;
    const eps = 1e-6;
    const at = (m: number) => tailLoss(c.model, c.params, cache.A, cache.levels.map((lv) => lv.y), l, m, c.batch.targets);
    // dg_l is compared rather than db_freq_l = dg_l g_l (1 − g_l): a clearly-off level's g(1 − g) ~ 0.07 would shrink it.
    fd[`dg_${l}`] = [(at(1 + eps) - at(1 - eps)) / (2 * eps)];
    tape[`dg_${l}`] = [got.grads.levels[l]!.b_freq!.data[0]! / (g * (1 - g))];
  }
  // One level's <dSum, y_l> may cancel to ~1e-7 by chance: vacuous only when every level's does.
  const r = compareTensors(tape, fd, TOL_FD, 0);
  if (!r.ok) return outcome(r);
  const largest = Math.max(...Object.values(fd).map((v) => Math.abs(v[0]!)));
  if (largest < VACUITY_FACTOR * TOL_FD.atol) return { ok: false, vacuous: true, message: `every dg_l is below ${VACUITY_FACTOR * TOL_FD.atol}` };
  return { ok: true, worst: cmp.worst };
}

/** Levels 1 and 2 clearly on and off (swapped when sign < 0), level 3 wherever its random bias puts it. */
function withGateBiases(c: ModelCase, sign: number): ModelCase {
  const bias = [0, 2.5 * sign, -2.5 * sign];
  c.params.levels.forEach((rec, l) => {
    if (l > 0 && l < bias.length) rec.b_freq!.data[0] = bias[l]!;
  });
  return c;
}

/** The model's tail from A and the level outputs, with level l's output times m (untraced ops). */
function tailLoss(model: Model, params: ModelParams, A: Data, ys: readonly Tensor[], l: number, m: number,
  targets: readonly number[]): number {
  const dt = ys[0]!.dtype;
  const parts = ys.map((y, i) => (i === l ? scale([y], { c: m }) : y));
  let sum = parts[0]!;
  for (let i = 1; i < parts.length; i++) sum = add([sum, parts[i]!], {});
  const comb = model.combineScale === null ? sum : scale([sum], { c: model.combineScale });
  const At = new Tensor(dt, comb.shape, A);
  const O = mul([At, sigmoid([comb], {})], {});
  const Z = matmul([matmulTransposeB([O, params.model.W_o], {}), params.model.W_unembed], {});
  return crossEntropy([Z], { targets }).data[0]!;
}

/** Smoke check of the whole pipeline: 50 tape-path steps at lr 0.01 from the D4 init lower the loss. */
function lossDecreases(spec: ModelCaseSpec): CaseOutcome {
  const c = buildModelCase(spec);
  const { losses } = runBuild(c.model, cloneParams(c.params), c.batch, c.context, { steps: 50, lr: LR, stepper: tapeStep });
  const first = losses[0]!, last = losses[losses.length - 1]!;
  if (!losses.every(Number.isFinite)) return { ok: false, message: `a loss was not finite: ${losses.find((x) => !Number.isFinite(x))}` };
  if (!(last < first)) return { ok: false, message: `loss went from ${first} to ${last} in 50 steps` };
  return { ok: true, message: `loss ${first.toFixed(6)} -> ${last.toFixed(6)}` };
}

// ── the catalogue part ──────────────────────────────────────────────────────

const FIXED: FreqSchedule = { kind: "fixed" };
const LEARNED: FreqSchedule = { kind: "learned", threshold: DEFAULT_FREQ_THRESHOLD };

/** One fixed, representative case (C7 loops are deterministic single runs). */
function fixedSpec(rules: readonly MemoryRuleKey[], seed: number, over: Partial<ModelCaseSpec> = {}): ModelCaseSpec {
  return {
    d: 6, seq_len: 6, vocab: 11, heads: 2, window: 4, pad: true, seed, freq: FIXED, context: "init",
    levels: rules.map((rule) => ({ rule, hyper: {} })), ...over,
  };
}

export function modelChecks(): CheckDef<any>[] {
  const checks: CheckDef<any>[] = [];
  const tolC3 = { kind: "tape-vs-hand-written", loss: "bitwise", ...TOL_ULP, buffers: "same bound", unused: "exactly 0" };
  for (const t of targets()) {
    // Mixing needs at least two levels.
    for (const k of t.key === "mixed" ? KS.filter((k) => k > 1) : KS) {
      for (const p of patterns(k)) {
        const subject = t.subject(k, p);
        const id = `${t.key}/k${k}/${p.name}`;
        checks.push({
          id: `C3/${id}`, class: "C3", subject, spec: SPEC_C3, tolerance: tolC3, runs: RUNS_C3,
          arb: specArb(t.rules(k), SIZES, FIXED), run: (s: ModelCaseSpec) => c3Case(s, p),
        });
        checks.push({
          id: `C4/${id}`, class: "C4", subject,
          spec: "docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold (opt-in recording, same bits); docs/spec/titans-family.md#mag-forward, docs/spec/titans-family.md#cms-context",
          tolerance: { kind: "bitwise", dtypes: ["f64", "f32"], compared: "loss, level outputs, final context" },
          runs: RUNS_C4, arb: specArb(t.rules(k), SIZES, FIXED), run: (s: ModelCaseSpec) => c4Case(s, p),
        });
      }
      // Model C2: full Jacobian on tiny k = 1 shapes, random directions on the frozen patterns.
      const c2Pattern = k === 1 ? patterns(1)[0]! : k === 2 ? patterns(2)[1]! : patterns(4).find((p) => p.name === "step-8")!;
      checks.push({
        id: `C2/model/${t.key}/k${k}/${c2Pattern.name}`, class: "C2", subject: t.subject(k, c2Pattern),
        spec: "docs/spec/conformance.md#c2 (MAG cross entropy); docs/spec/titans-family.md#mag; docs/spec/decisions.md#d2, docs/spec/decisions.md#d12",
        tolerance: {
          kind: "finite-differences", ...TOL_FD, ...FD_METHOD, full_max_elements: FULL_FD_MAX, directions: DIRECTIONS,
          vacuity: "per group (model, each level): max |grad| >= 100·atol",
        },
        runs: RUNS_C2, arb: specArb(t.rules(k), k === 1 ? TINY : SIZES, FIXED), run: (s: ModelCaseSpec) => c2Case(s, c2Pattern),
      });
      checks.push({
        id: `C7/build-loop/${t.key}/k${k}`, class: "C7", subject: { rule: t.key, k, frozen: k > 1 },
        spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers (training loop); docs/spec/decisions.md#d13",
        tolerance: { kind: "trajectory", step0: "bitwise", rtol: TRAJECTORY_RTOL, steps: 10, reason: "after step 0 the two paths' parameters differ by ULPs, which the loss carries forward" },
        run: () => trajectoryCase(fixedSpec(levelRules(t.key, k), 101 + k), 10),
      });
      if (k > 1) {
        checks.push({
          id: `C7/learned-gate/${t.key}/k${k}`, class: "C7", subject: { rule: t.key, k, frozen: true },
          spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10 (straight-through, true sign)",
          tolerance: {
            kind: "tape-vs-hand-written", ...TOL_ULP,
            sign: { kind: "finite-differences", ...TOL_FD, compared: "dg_l = <dSum, y_l> per level", vacuity: "max_l |dg_l| >= 100·atol" },
          },
          runs: RUNS_GATE, arb: specArb(t.rules(k), SIZES, LEARNED), run: (s: ModelCaseSpec) => learnedGateCase(s),
        });
      }
    }
    if (t.key !== "mixed") {
      checks.push({
        id: `C7/error-buffers/${t.key}/k2`, class: "C7", subject: { rule: t.key, k: 2, frozen: true },
        spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d13",
        tolerance: { kind: "exact", steps: 9, chunk_sizes: [1, 8] },
        run: () => errorBufferCase(fixedSpec(levelRules(t.key, 2), 211), 9, tapeStep),
      });
      checks.push({
        id: `C7/loss-decreases/${t.key}/k1`, class: "C7", subject: { rule: t.key, k: 1, frozen: false },
        spec: "docs/spec/conformance.md#c7 (smoke: forward, tape backward, SGD, advance); docs/spec/titans-family.md#mag-backward",
        tolerance: { kind: "smoke", steps: 50, lr: LR, criterion: "last loss < first loss" },
        run: () => lossDecreases(fixedSpec([t.key as MemoryRuleKey], 307)),
      });
    }
  }
  // The learned gate's extra ops (mean, sigmoid, straight-through multipliers) under C4 too.
  for (const k of KS.filter((k) => k > 1)) {
    const p = patterns(k)[0]!;
    checks.push({
      id: `C4/mixed/k${k}/learned`, class: "C4", subject: { rule: "mixed", k, frozen: true },
      spec: "docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold; docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10",
      tolerance: { kind: "bitwise", dtypes: ["f64", "f32"], compared: "loss, level outputs, final context" },
      runs: RUNS_C4, arb: specArb(mixedRules(k), SIZES, LEARNED), run: (s: ModelCaseSpec) => c4Case(s, p),
    });
  }
  for (const k of KS) {
    checks.push({
      id: `C7/pulse/k${k}`, class: "C7", subject: { k }, spec: "docs/spec/titans-family.md#cms-pulse; docs/spec/decisions.md#d11",
      tolerance: { kind: "exact", steps: 600 }, run: () => pulseSchedule(k),
    });
  }
  // Several levels buffering at once, on both paths, with short chunks so every level cycles.
  for (const [name, stepper] of [["tape", tapeStep], ["hand-written", cmsStep]] as const) {
    checks.push({
      id: `C7/error-buffers/mixed/k4/${name}`, class: "C7", subject: { rule: "mixed", k: 4, frozen: true },
      spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d13",
      tolerance: { kind: "exact", steps: 9, chunk_sizes: [1, 2, 3, 4] },
      run: () => errorBufferCase(fixedSpec(["delta", "moneta", "lattice", "trellis"], 223, { context: "random", chunk_sizes: [1, 2, 3, 4] }), 9, stepper),
    });
  }
  checks.push({
    id: "C7/build-loop/mixed/k4/learned", class: "C7", subject: { rule: "mixed", k: 4, frozen: true },
    spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers, docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10, docs/spec/decisions.md#d13",
    tolerance: { kind: "trajectory", step0: "bitwise", rtol: TRAJECTORY_RTOL, steps: 10 },
    run: () => trajectoryCase(fixedSpec(["titans", "yaad", "atlas", "memora"], 131, { freq: LEARNED, context: "random" }), 10),
  });
  return checks;
}

/** The C7 loops' level rules: one rule everywhere, or a fixed rotation through the registry for "mixed". */
function levelRules(key: string, k: number): MemoryRuleKey[] {
  if (key !== "mixed") return Array.from({ length: k }, () => key as MemoryRuleKey);
  return Array.from({ length: k }, (_, l) => MEMORY_RULES[(l * 4 + k) % MEMORY_RULES.length]!);
}
