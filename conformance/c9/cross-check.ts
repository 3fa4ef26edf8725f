#!/usr/bin/env bun
/**
 * Cross-implementation check (README D19, class C9 in the making): every rule and frozen
 * variant, SWA, and MAG + CMS model cases, built with the TypeScript reference's own case
 * builders, run through the TypeScript reference (hand-written backward) and through the
 * independent PyTorch implementation (python/nlc_torch, autograd), both in f64. Prints, per case,
 * the worst relative difference max|torch − ts| / max|ts| of y, the final state, every gradient,
 * the loss and the error buffers (max|ts| floored at 1e-3 of the largest tensor of the same
 * group in the case, so that exactly-cancelling gradients compare their rounding to a scale).
 *
 *   ./node_modules/.bin/bun conformance/c9/cross-check.ts [--cases N] [--seed S] [--large] [--extreme] [--rule KEY]...
 *       [--no-rules] [--no-model] [--no-fixtures] [--verbose] [--tol X] [--json PATH]
 *
 * Exit code 1 when any compared tensor differs by more than --tol (default 1e-10), 2 when the
 * bridge is unavailable.
 */
import * as fc from "fast-check";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { buildRuleCase, clampHyper, ruleCaseSpecArb, type RuleCase, type RuleCaseSpec, type SizeLimits } from "../../cases/rule-case.ts";
import { cmsStep } from "../../oracle/cms-backward.ts";
import { buildModelCase, chunkSizesFor, smallModelSpec, type ModelCaseSpec } from "../../cases/model-case.ts";
import { maxAbs } from "../../src/numeric.ts";
import { pulseAt } from "../../src/model/conductor.ts";
import { DEFAULT_FREQ_THRESHOLD, type MemoryRuleKey } from "../../src/model/config.ts";
import { contextKeys } from "../../src/model/context.ts";
import { tapeStep } from "../../src/model/step.ts";
import { RULES } from "../../src/rules/index.ts";
import { frozenBackwardWithState, frozenForward, frozenForwardSaved, ruleBackwardWithState, ruleForward, ruleForwardSaved } from "../../src/rules/level.ts";
import { Rng } from "../../src/rng.ts";
import { fdDirectional } from "../../oracle/fd.ts";
import { MEMORY_RULES } from "../../src/rules/index.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { Tensor } from "../../src/tensor.ts";
import { TorchBridge, probeTorch, type ModelReply } from "../../oracle/torch-bridge.ts";

// ── options ─────────────────────────────────────────────────────────────────────────────────

export interface Options {
  cases: number;
  seed: number;
  large: boolean;
  extreme: boolean;
  rules: string[];
  doRules: boolean;
  doModel: boolean;
  doFixtures: boolean;
  verbose: boolean;
  tol: number;
  json: string | null;
}

export function parseArgs(argv: string[]): Options {
  const o: Options = { cases: 6, seed: 1, large: false, extreme: false, rules: [], doRules: true, doModel: true, doFixtures: true, verbose: false, tol: 1e-10, json: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--cases") o.cases = Number(val());
    else if (a === "--seed") o.seed = Number(val());
    else if (a === "--large") o.large = true;
    else if (a === "--extreme") o.extreme = true;
    else if (a === "--rule") o.rules.push(...val().split(","));
    else if (a === "--no-rules") o.doRules = false;
    else if (a === "--no-model") o.doModel = false;
    else if (a === "--no-fixtures") o.doFixtures = false;
    else if (a === "--verbose") o.verbose = true;
    else if (a === "--tol") o.tol = Number(val());
    else if (a === "--json") o.json = val();
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

// ── comparison ──────────────────────────────────────────────────────────────────────────────

interface Diff {
  readonly name: string;
  /** max|a − b| / max|b|; Infinity on a shape mismatch or a missing tensor; 0 when both are all zero. */
  readonly rel: number;
  readonly abs: number;
  readonly refMax: number;
  readonly note?: string;
}


function diff(name: string, torch: Tensor | undefined, ts: Tensor | number | undefined): Diff {
  if (ts === undefined) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "missing in the TS reference" };
  if (torch === undefined) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "missing in the torch reply" };
  const b = typeof ts === "number" ? [ts] : ts.data;
  const a = torch.data;
  if (typeof ts !== "number" && ts.shape.join(",") !== torch.shape.join(",")) {
    return { name, rel: Infinity, abs: Infinity, refMax: 0, note: `shape torch [${torch.shape}] vs ts [${ts.shape}]` };
  }
  if (a.length !== b.length) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "length mismatch" };
  let abs = 0, nonFinite = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    // The same non-finite value on both sides (both implementations overflowed) is agreement.
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      if (Object.is(x, y)) {
        nonFinite++;
        continue;
      }
      abs = NaN;
      continue;
    }
    const e = Math.abs(x - y);
    if (!(e <= abs)) abs = e;
  }
  if (nonFinite > 0) {
    const rel = Number.isNaN(abs) ? NaN : 0;
    return { name, rel, abs, refMax: 0, note: `${nonFinite} non-finite entries in both` };
  }
  const refMax = maxAbs(b);
  const rel = abs === 0 ? 0 : refMax === 0 ? Infinity : abs / refMax;
  return { name, rel, abs, refMax };
}

/**
 * A tensor whose true value is (nearly) zero, e.g. a gate gradient that cancels exactly by a
 * symmetry, compares its rounding residue to itself; the reference scale of each tensor is
 * therefore at least FLOOR times the largest max|ts| of its group in the same case (y, final
 * state, gradients + error buffers, context, level outputs), and when a whole group is exactly
 * zero in the reference (e.g. Trellis' nsilu with dk = 1 is piecewise constant), FLOOR times the
 * largest max|ts| of the case (the case builders put y at unit scale).
 */
const FLOOR = 1e-3;

function groupOf(name: string): string {
  if (name.startsWith("grads.") || name.startsWith("error_buffers.")) return "grads";
  return name.split(".")[0]!;
}

function withFloor(ds: readonly Diff[]): Diff[] {
  const scale = new Map<string, number>();
  for (const d of ds) {
    const g = groupOf(d.name);
    if (Number.isFinite(d.refMax)) scale.set(g, Math.max(scale.get(g) ?? 0, d.refMax));
  }
  const caseMax = Math.max(0, ...scale.values());
  return ds.map((d) => {
    if (d.note !== undefined && d.refMax === 0 && !Number.isFinite(d.abs)) return d;
    if (d.note !== undefined && d.note.includes("non-finite")) return d;
    const ref = Math.max(d.refMax, FLOOR * (scale.get(groupOf(d.name)) || caseMax));
    const rel = d.abs === 0 ? 0 : ref === 0 ? Infinity : d.abs / ref;
    return { ...d, rel };
  });
}

function scalar(x: number): Tensor {
  return new Tensor("f64", [], Float64Array.of(x));
}

function worst(ds: readonly Diff[]): Diff | null {
  let w: Diff | null = null;
  for (const d of ds) if (w === null || !(d.rel <= w.rel)) w = d;
  return w;
}

function fmt(x: number): string {
  if (x === 0) return "0";
  if (!Number.isFinite(x)) return String(x);
  return x.toExponential(1);
}

// ── rule cases ──────────────────────────────────────────────────────────────────────────────

interface RuleCaseResult {
  readonly key: string;
  readonly spec: RuleCaseSpec;
  readonly diffs: Diff[];
  readonly ms: number;
  readonly roundTripMs: number;
  readonly skipped: string[];
  readonly stateFd: StateFd | null;
}

/** torch's d loss / d initial state along u vs central differences (with a Richardson step) of the TS forward. */
interface StateFd {
  readonly an: number;
  readonly fd: number;
  /** The step that was used (the first of FD_STEPS that agrees, else the last). */
  readonly h: number;
  readonly ok: boolean;
}

const FD_STEPS = [1e-5, 1e-6, 1e-7];

/**
 * States at which the loss is not differentiable, so that finite differences measure a jump:
 * Trellis' first read of S_K = 0 (nsilu's zero guard is a discontinuity), MEMORA entries at or
 * below the 1e-8 log clamp (a kink), Lattice zero slots (the norm fallback).
 */
function fdSkipReason(key: string, state: Readonly<Record<string, Tensor>>): string | null {
  const allZero = (t: Tensor | undefined) => t !== undefined && t.data.every((x) => x === 0);
  if (key === "trellis" && allZero(state.S_K)) return "S_K = 0: nsilu guard";
  if (key === "memora" && Object.values(state).some((t) => t.data.some((x) => x <= 1e-8 + 1e-5))) return "W <= 1e-8: log clamp";
  if (key === "lattice" && state.S !== undefined) {
    const S = state.S, d = S.shape[1]!;
    for (let i = 0; i < S.shape[0]!; i++) if (S.data.subarray(i * d, (i + 1) * d).every((x) => x === 0)) return "zero slot: norm fallback";
  }
  return null;
}

/** The suite's finite-difference tolerance (README: rtol 1e-5, atol 1e-8). */
const FD_RTOL = 1e-5, FD_ATOL = 1e-8;

/** Hyperparameter points every run includes (fast paths, variants, clipping regimes). */
const PINNED_HYPER: Readonly<Record<string, readonly Record<string, number | string>[]>> = {
  moneta: [{ p: 1, q: 2 }, { p: 2, q: 2 }, { p: 1.5, q: 2 }, { p: 3, q: 2 }, { p: 2, q: 3 }, { p: 1, q: 2.5 }, { p: 2.5, q: 2.5, lambda_2: 0.2 }],
  yaad: [{ delta: 0.05 }, { delta: 2, lambda_local: 0.2 }],
  lattice: [{ variant: "decode" }, { variant: "encode" }, { variant: "similarity" }],
  trellis: [{ d_compress: 2 }, { d_compress: 4 }],
  memora: [{ d_hidden: 1 }, { d_hidden: 6 }],
  swa: [{ heads: 2, window: 2 }, { heads: 1, window: 9 }],
};

/** With --extreme: points inside the declared ranges but outside the sampled ones. */
const EXTREME_HYPER: Readonly<Record<string, readonly Record<string, number | string>[]>> = {
  moneta: [{ p: 5, q: 1.5 }, { p: 1.2, q: 4, sign_sharpness: 100 }, { p: 1.000001, q: 2.000001 }, { p: 2, q: 16, lambda_2: 2 }],
  yaad: [{ delta: 1e-3 }, { delta: 1e3, lambda_local: 5, lambda_2: 5 }],
  lattice: [{ m_slots: 1, variant: "similarity" }, { m_slots: 12, variant: "encode" }],
  trellis: [{ d_compress: 6, lambda_k: 5, lambda_v: 5 }, { d_compress: 1 }],
  memora: [{ d_hidden: 12 }],
  swa: [{ heads: 6, window: 1 }, { heads: 3, window: 100 }],
};

function ruleSpecs(decl: RuleDecl, o: Options, frozen: boolean): RuleCaseSpec[] {
  const salt = (decl.key.charCodeAt(0) * 131 + decl.key.length * 7 + (frozen ? 1 : 0)) | 0;
  const specs = fc.sample(ruleCaseSpecArb(decl), { seed: o.seed * 7919 + salt, numRuns: o.cases });
  // Golden-fixture shape (d = 4, s = 4, defaults), from the init state and a random state.
  specs.push({ d: 4, seq_len: 4, hyper: {}, alpha: "mid", theta: "large", state: "random", seed: 1000 + salt });
  specs.push({ d: 4, seq_len: 4, hyper: {}, alpha: "high", theta: "small", state: "init", seed: 1001 + salt });
  for (const [i, h] of (PINNED_HYPER[decl.key] ?? []).entries()) {
    const hyper: Record<string, number | string> = { ...h };
    if (decl.key === "trellis") hyper.d_compress = Math.min(Number(h.d_compress), 5);
    specs.push(clampHyper(decl, { d: 6, seq_len: 6, hyper, alpha: (["low", "mid", "high"] as const)[i % 3]!, theta: "large", state: i % 2 ? "init" : "random", seed: 2000 + i + salt }));
  }
  if (o.extreme) {
    for (const [i, h] of (EXTREME_HYPER[decl.key] ?? []).entries()) {
      for (const theta of ["small", "large"] as const) {
        specs.push(clampHyper(decl, { d: 6, seq_len: 7, hyper: { ...h }, alpha: (["low", "mid", "high"] as const)[i % 3]!, theta, state: "random", seed: 3000 + i + salt }));
      }
    }
    // Long sequences and wide levels.
    specs.push(clampHyper(decl, { d: 32, seq_len: 48, hyper: {}, alpha: "high", theta: "small", state: "random", seed: 4000 + salt }));
    specs.push(clampHyper(decl, { d: 1, seq_len: 24, hyper: { ...(decl.key === "trellis" ? { d_compress: 1 } : {}) }, alpha: "mid", theta: "large", state: "random", seed: 4001 + salt }));
  }
  if (o.large) {
    const big: SizeLimits = { d: [13, 24], seq_len: [10, 24] };
    specs.push(...fc.sample(ruleCaseSpecArb(decl, big), { seed: o.seed * 104729 + salt, numRuns: Math.max(2, Math.ceil(o.cases / 3)) }));
  }
  return specs;
}

async function runRuleCase(br: TorchBridge, decl: RuleDecl, frozen: boolean, spec: RuleCaseSpec,
  edit?: (c: RuleCase) => void): Promise<RuleCaseResult> {
  const c = buildRuleCase(decl, spec, "f64", frozen);
  edit?.(c);
  let y: Tensor, finalState: Readonly<Record<string, Tensor>>, grads: Record<string, Tensor>;
  // torch differentiates sum(y ⊙ dy) only, so the TS state gradient is taken with no dFinal.
  let dState: Record<string, Tensor>;
  if (frozen) {
    const r = frozenForwardSaved(decl, c.X, c.params, c.state, c.cfg);
    y = r.y;
    finalState = c.state;
    const g = frozenBackwardWithState(decl, r.saved, c.dy, c.cfg);
    grads = { X: g.X, W_Q: g.W_Q };
    dState = g.dState;
  } else {
    const r = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg);
    y = r.y;
    finalState = r.finalState;
    const g = ruleBackwardWithState(decl, r.saved, c.dy, c.cfg);
    grads = g.grads;
    dState = g.dState0;
  }
  // A case from the rule's init sends no state: torch then starts from its own D4 init (init hash).
  const sendState = spec.state === "init" && edit === undefined ? undefined : c.state;
  const t = await br.runRule({ rule: decl.key, frozen, config: c.cfg, X: c.X, dy: c.dy, params: c.params, state: sendState });
  const diffs: Diff[] = [diff("y", t.y, y)];
  for (const [n, ref] of Object.entries(finalState)) diffs.push(diff(`state.${n}`, t.state[n], ref));
  // Every parameter: the TS frozen backward returns only X and W_Q; the others are zero by D13.
  for (const n of ["X", ...Object.keys(c.params)]) {
    const ref = grads[n];
    if (ref !== undefined) diffs.push(diff(`grads.${n}`, t.grads[n], ref));
    else {
      const z = maxAbs(t.grads[n]?.data ?? [NaN]);
      diffs.push({ name: `grads.${n}`, rel: z === 0 ? 0 : Infinity, abs: z, refMax: 0, note: "TS returns none: torch must be 0" });
    }
  }
  // The initial state's gradient (docs/spec/state-gradients.md#checks); a state entry the frozen
  // read does not read (Titans' S) has none in TS: torch's must be 0.
  for (const [n, g] of Object.entries(t.stateGrads)) {
    const ref = dState[n];
    if (ref !== undefined) diffs.push(diff(`grads.state.${n}`, g, ref));
    else {
      const z = maxAbs(g.data);
      diffs.push({ name: `grads.state.${n}`, rel: z === 0 ? 0 : Infinity, abs: z, refMax: 0, note: "TS returns none: torch must be 0" });
    }
  }
  const skipped = Object.keys(t.state).filter((n) => !(n in finalState)).map((n) => `state.${n}`);
  // torch's state gradient is also checked against central differences of the TS forward along
  // one random direction (independent of both backwards).
  const names = Object.keys(c.state).filter((n) => t.stateGrads[n] !== undefined);
  let stateFd: StateFd | null = null;
  const overflowed = Object.values(grads).some((g) => g.data.some((x) => !Number.isFinite(x)));
  const skip = overflowed ? "the reference overflowed" : fdSkipReason(decl.key, c.state);
  if (names.length > 0 && skip === null) {
    const rng = new Rng(spec.seed ^ 0x5eed);
    const us = names.map((n) => Float64Array.from({ length: c.state[n]!.size }, () => rng.uniform(-1, 1)));
    const loss = () => {
      const y2 = frozen ? frozenForward(decl, c.X, c.params, c.state, c.cfg) : ruleForward(decl, c.X, c.params, c.state, c.cfg).y;
      let acc = 0;
      for (let i = 0; i < y2.size; i++) acc += y2.data[i]! * c.dy.data[i]!;
      return acc;
    };
    let an = 0;
    names.forEach((n, k) => {
      const g = t.stateGrads[n]!.data, u = us[k]!;
      for (let i = 0; i < u.length; i++) an += g[i]! * u[i]!;
    });
    // Strongly curved states (an L_q normalisation of a near-zero accumulator) need smaller steps.
    for (const h of FD_STEPS) {
      const fd = fdDirectional(loss, names.map((n) => c.state[n]!), us, h);
      stateFd = { an, fd, h, ok: Math.abs(an - fd) <= FD_ATOL + FD_RTOL * Math.abs(fd) };
      if (stateFd.ok) break;
    }
  }
  return { key: frozen ? `${decl.key}.frozen` : decl.key, spec, diffs: withFloor(diffs), ms: t.ms, roundTripMs: t.roundTripMs, skipped, stateFd };
}

/**
 * Edge cases at the guards of the math: a zero input row (L2 normalisation below its eps, the
 * gates' pre-activation exactly at the bias 0, so softplus'(0) = 1/2), zero states (MLP
 * stationary point, MEMORA's log clamp, Trellis' nsilu guard, Lattice's norm fallback).
 */
interface Edge {
  readonly id: string;
  readonly rules: readonly string[];
  edit(c: { -readonly [P in keyof RuleCase]: RuleCase[P] }): void;
}

function zeroRow(c: RuleCase, t: number): void {
  const d = c.cfg.d;
  if (t < c.cfg.seq_len) c.X.data.fill(0, t * d, (t + 1) * d);
}

function zeroBiases(c: RuleCase): void {
  for (const n of ["b_alpha", "b_theta", "b_eta"]) c.params[n]?.data.fill(0);
}

function zeroState(c: RuleCase): void {
  for (const t of Object.values(c.state)) t.data.fill(0);
}

const EDGES: readonly Edge[] = [
  {
    id: "theta pre-activation near 20.5", rules: ["delta", "titans", "atlas", "moneta", "yaad", "memora", "trellis"],
    edit: (c) => {
      // softplus(20.5) = 20.5 + 1.2e-9 and softplus'(20.5) = 1 - 1.2e-9: a threshold cut shows.
      c.params.b_theta!.data[0] = 20.5;
      c.params.w_theta!.data.forEach((_, i, a) => { a[i] = a[i]! * 1e-3; });
    },
  },
  { id: "zero X row, zero gate biases", rules: [...MEMORY_RULES, "swa"], edit: (c) => { zeroRow(c, 1); zeroBiases(c); } },
  { id: "zero state", rules: MEMORY_RULES, edit: zeroState },
  {
    // On the unit sphere Lattice's similarity write equals the decode write (the tangent step
    // removes the slot component anyway); only slots off the sphere tell them apart.
    id: "lattice slots off the unit sphere", rules: ["lattice"],
    edit: (c) => {
      const S = c.state.S!, d = S.shape[1]!;
      for (let i = 0; i < S.shape[0]!; i++) for (let j = 0; j < d; j++) S.data[i * d + j]! *= 0.4 + 0.5 * i;
      c.cfg = { ...c.cfg, variant: "similarity" };
    },
  },
  { id: "zero state and zero X rows 0, 2", rules: MEMORY_RULES, edit: (c) => { zeroState(c); zeroRow(c, 0); zeroRow(c, 2); } },
];

// ── model cases ─────────────────────────────────────────────────────────────────────────────

interface ModelCaseResult {
  readonly id: string;
  readonly diffs: Diff[];
  readonly tapeDiffs: Diff[];
  readonly activeMatch: boolean;
  /** torch's active levels, e.g. "TTFF". */
  readonly pattern: string;
  readonly ms: number;
}


export interface ModelCaseDef {
  readonly id: string;
  readonly spec: ModelCaseSpec;
  readonly pulse: readonly boolean[];
  /** Learned gate: force level 1 on and level 2 off through b_freq (as the golden fixture does). */
  readonly pin?: boolean;
}

export function modelCases(o: Options): ModelCaseDef[] {
  const out: ModelCaseDef[] = [];
  const rules = MEMORY_RULES.filter((r) => o.rules.length === 0 || o.rules.some((f) => r === f || `${r}.frozen` === f));
  rules.forEach((rule, i) => {
    const s = o.seed * 1000 + 10 * i;
    out.push({ id: `${rule} k1 all-active init`, spec: smallModelSpec(rule, 1, s + 1, { context: "init" }), pulse: [true] });
    out.push({ id: `${rule} k2 all-active`, spec: smallModelSpec(rule, 2, s + 2), pulse: [true, true] });
    out.push({ id: `${rule} k2 frozen-1`, spec: smallModelSpec(rule, 2, s + 3), pulse: [true, false] });
    out.push({ id: `${rule} k4 all-active`, spec: smallModelSpec(rule, 4, s + 4), pulse: [true, true, true, true] });
    out.push({ id: `${rule} k4 step-8`, spec: smallModelSpec(rule, 4, s + 5), pulse: pulseAt(8, chunkSizesFor(4)).active });
    out.push({
      id: `${rule} k2 frozen-1 warm d6`, pulse: [true, false],
      spec: smallModelSpec(rule, 2, s + 6, { d: 6, seq_len: 7, vocab: 11, heads: 3, window: 4, context: "warm" }),
    });
    const learned = { kind: "learned", threshold: DEFAULT_FREQ_THRESHOLD } as const;
    out.push({ id: `${rule} k4 learned`, spec: smallModelSpec(rule, 4, s + 7, { freq: learned }), pulse: [true, true, true, true], pin: true });
    out.push({ id: `${rule} k2 learned`, spec: smallModelSpec(rule, 2, s + 8, { freq: learned }), pulse: [true, true] });
  });
  if (o.rules.length === 0) {
    // Mixed levels (the model allows a rule per level).
    out.push({
      id: "mixed delta/moneta/lattice/trellis k4 step-8", pulse: pulseAt(8, chunkSizesFor(4)).active,
      spec: { ...smallModelSpec("delta", 4, o.seed * 1000 + 999), levels: ["delta", "moneta", "lattice", "trellis"].map((r) => ({ rule: r as MemoryRuleKey, hyper: {} })) },
    });
  }
  return out;
}

async function runModelCase(br: TorchBridge, def: ModelCaseDef): Promise<ModelCaseResult> {
  const c = buildModelCase(def.spec);
  if (def.pin) c.params.levels.forEach((rec, l) => { if (l === 1 || l === 2) rec.b_freq!.data[0] = l === 1 ? 2.5 : -2.5; });
  const ref = cmsStep(c.model, c.params, c.batch, def.pulse, c.context);
  const tape = tapeStep(c.model, c.params, c.batch, def.pulse, c.context);
  const spec = c.model.spec;
  const t: ModelReply = await br.runModel({
    config: {
      d: spec.d, seq_len: spec.seq_len, vocab: spec.vocab, heads: spec.heads, window: spec.window,
      freq_schedule: spec.freq.kind, ...(spec.freq.kind === "learned" ? { freq_threshold: spec.freq.threshold } : {}),
    },
    levels: c.model.levels.map((lv) => {
      const { d: _d, seq_len: _s, ...hyper } = lv.cfg;
      return { rule: lv.decl.key, hyper };
    }),
    chunkSizes: spec.chunk_sizes,
    active: def.pulse,
    ids: c.batch.ids,
    targets: c.batch.targets,
    params: c.params,
    // From the init context (D4), none is sent: torch starts from its own init.
    context: def.spec.context === "init" ? undefined : c.context,
  });
  const compare = (r: typeof ref): Diff[] => {
    const ds: Diff[] = [diff("loss", scalar(t.loss), r.loss)];
    for (const [n, g] of Object.entries(r.grads.model)) ds.push(diff(`grads.model.${n}`, t.grads.model[n], g));
    r.grads.levels.forEach((rec, l) => {
      for (const [n, g] of Object.entries(rec)) ds.push(diff(`grads.levels.${l}.${n}`, t.grads.levels[l]![n], g));
    });
    r.buffers.forEach((rec, l) => {
      const tb = t.errorBuffers[l]!;
      for (const [n, g] of Object.entries(rec)) ds.push(diff(`error_buffers.${l}.${n}`, tb[n], g));
      for (const n of Object.keys(tb)) if (!(n in rec)) ds.push({ name: `error_buffers.${l}.${n}`, rel: Infinity, abs: Infinity, refMax: 0, note: "torch-only buffer" });
    });
    r.context.forEach((ctx, l) => {
      for (const n of contextKeys(c.model.levels[l]!)) ds.push(diff(`context.${l}.${n}`, t.context[l]![n], ctx[n]));
    });
    r.levelOutputs.forEach((y, l) => ds.push(diff(`level_outputs.${l}`, t.levelOutputs[l], y)));
    if (r.gates !== null) r.gates.forEach((g, l) => ds.push(diff(`gates.${l}`, scalar(t.gates?.[l] ?? NaN), g)));
    return withFloor(ds);
  };
  const activeMatch = ref.active.length === t.active.length && ref.active.every((a, l) => a === t.active[l]);
  const pattern = t.active.map((a) => (a ? "T" : "F")).join("");
  return { id: def.id, diffs: compare(ref), tapeDiffs: compare(tape), activeMatch, pattern, ms: t.ms };
}

// ── golden fixtures ─────────────────────────────────────────────────────────────────────────

type JsonT = { shape: number[]; data: number[] };

function fromJson(j: JsonT): Tensor {
  return new Tensor("f64", j.shape, Float64Array.from(j.data));
}

function recFromJson(r: Record<string, JsonT> | undefined): Record<string, Tensor> {
  return Object.fromEntries(Object.entries(r ?? {}).map(([n, t]) => [n, fromJson(t)]));
}

const MODEL_CONFIG_KEYS = ["d", "seq_len", "vocab", "heads", "window", "freq_schedule", "freq_threshold"];

/** Replays an nlc-fixture/1 file through the bridge; null for a file it does not replay (f32). */
async function replayFixture(br: TorchBridge, doc: any): Promise<{ diffs: Diff[]; activeMatch: boolean } | null> {
  if (doc.dtype !== "f64") return null;
  const ex = doc.expected;
  const diffs: Diff[] = [];
  if (doc.target.kind === "rule") {
    const t = await br.runRule({
      rule: doc.target.rule, frozen: doc.target.frozen, config: doc.config, X: fromJson(doc.inputs.X), dy: fromJson(doc.inputs.dy),
      params: recFromJson(doc.inputs.params), state: doc.inputs.state === undefined ? undefined : recFromJson(doc.inputs.state),
    });
    diffs.push(diff("y", t.y, fromJson(ex.y)));
    for (const [n, v] of Object.entries(recFromJson(ex.state))) diffs.push(diff(`state.${n}`, t.state[n], v));
    for (const [n, v] of Object.entries(recFromJson(ex.grads))) diffs.push(diff(`grads.${n}`, t.grads[n], v));
    return { diffs: withFloor(diffs), activeMatch: true };
  }
  const cfg = doc.config;
  const hyper = Object.fromEntries(Object.entries(cfg).filter(([n]) => !MODEL_CONFIG_KEYS.includes(n))) as Record<string, number | string>;
  const t = await br.runModel({
    config: { d: cfg.d, seq_len: cfg.seq_len, vocab: cfg.vocab, heads: cfg.heads, window: cfg.window, freq_schedule: cfg.freq_schedule, freq_threshold: cfg.freq_threshold },
    levels: Array.from({ length: doc.target.k }, () => ({ rule: doc.target.rule, hyper })),
    chunkSizes: doc.target.chunk_sizes, active: doc.target.active,
    ids: doc.inputs.input_ids, targets: doc.inputs.target_ids,
    params: { model: recFromJson(doc.inputs.params.model), levels: doc.inputs.params.levels.map((r: any) => recFromJson(r)) },
    context: doc.inputs.context?.map((r: any) => recFromJson(r)),
  });
  diffs.push(diff("loss", scalar(t.loss), ex.loss as number));
  for (const [n, v] of Object.entries(recFromJson(ex.grads.model))) diffs.push(diff(`grads.model.${n}`, t.grads.model[n], v));
  ex.grads.levels.forEach((r: any, l: number) => {
    for (const [n, v] of Object.entries(recFromJson(r))) diffs.push(diff(`grads.levels.${l}.${n}`, t.grads.levels[l]![n], v));
  });
  (ex.error_buffers ?? []).forEach((r: any, l: number) => {
    for (const [n, v] of Object.entries(recFromJson(r))) diffs.push(diff(`error_buffers.${l}.${n}`, t.errorBuffers[l]![n], v));
  });
  const want = doc.target.active as boolean[];
  return { diffs: withFloor(diffs), activeMatch: want.every((a, l) => a === t.active[l]) };
}

// ── main ────────────────────────────────────────────────────────────────────────────────────

function group(ds: readonly Diff[], prefix: string): Diff | null {
  return worst(ds.filter((d) => d.name.startsWith(prefix)));
}

function cell(d: Diff | null, withName = false): string {
  if (d === null) return "-";
  const short = d.name.replace(/^grads\.(levels\.)?|^state\.|^error_buffers\.|^context\./, "");
  return withName ? `${fmt(d.rel)} (${short})` : fmt(d.rel);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
}

interface RuleAgg { y: Diff[]; st: Diff[]; gr: Diff[]; fd: StateFd[]; ms: number[]; rt: number[]; n: number; vac: number }

/** Worst |torch − FD| / max(|FD|, atol/rtol) over the cases, and how many were within the FD tolerance. */
function fdCell(fds: readonly StateFd[]): string {
  if (fds.length === 0) return "-";
  let w = 0;
  for (const f of fds) w = Math.max(w, Math.abs(f.an - f.fd) / Math.max(Math.abs(f.fd), FD_ATOL / FD_RTOL));
  return `${fmt(w)} ${fds.filter((f) => f.ok).length}/${fds.length}`;
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  const probe = await probeTorch();
  if (!probe.available) {
    console.error(`cross-check: the torch bridge is not available: ${probe.reason}`);
    return 2;
  }
  const br = await TorchBridge.start();
  console.log(`torch ${br.info.torch} (python ${br.info.python}); bridge startup ${br.startupMs.toFixed(0)} ms ` +
    `(probe run: ${probe.startupMs.toFixed(0)} ms); protocol ${br.info.protocol}; tolerance ${o.tol}`);
  let failures = 0;
  const report: Record<string, unknown> = { torch: br.info.torch, startupMs: br.startupMs, tol: o.tol };

  if (o.doRules) {
    console.log("\n== rule cases: max|torch − ts| / max|ts| ==");
    const perRule: Record<string, RuleAgg> = {};
    const all: RuleCaseResult[] = [];
    const edgeRows: string[] = [];
    for (const decl of RULES) {
      for (const frozen of decl.frozen === null ? [false] : [false, true]) {
        const key = frozen ? `${decl.key}.frozen` : decl.key;
        if (o.rules.length > 0 && !o.rules.includes(key) && !o.rules.includes(decl.key)) continue;
        const agg: RuleAgg = { y: [], st: [], gr: [], fd: [], ms: [], rt: [], n: 0, vac: 0 };
        perRule[key] = agg;
        for (const spec of ruleSpecs(decl, o, frozen)) {
          const r = await runRuleCase(br, decl, frozen, spec);
          all.push(r);
          agg.n++;
          agg.ms.push(r.ms);
          agg.rt.push(r.roundTripMs);
          const y = group(r.diffs, "y"), st = group(r.diffs, "state."), gr = group(r.diffs, "grads.");
          if (y) agg.y.push(y);
          if (st) agg.st.push(st);
          if (gr) agg.gr.push(gr);
          if (r.diffs.some((d) => d.refMax === 0 && d.abs === 0 && d.name === "y")) agg.vac++;
          const bad = r.diffs.filter((d) => !(d.rel <= o.tol));
          if (r.stateFd !== null) agg.fd.push(r.stateFd);
          const fdBad = r.stateFd !== null && !r.stateFd.ok;
          failures += bad.length > 0 || fdBad ? 1 : 0;
          const h = Object.entries(spec.hyper).map(([n, v]) => `${n}=${typeof v === "number" ? +v.toPrecision(3) : v}`).join(",");
          if (o.verbose || bad.length > 0 || fdBad) {
            console.log(`${key.padEnd(15)} d=${spec.d} s=${spec.seq_len} ${spec.alpha}/${spec.theta}/${spec.state} seed=${spec.seed} ${h}` +
              ` | y ${cell(y)} | state ${cell(st, true)} | grads ${cell(gr, true)} | d/dstate FD ${fdCell(r.stateFd === null ? [] : [r.stateFd])} | ${r.ms.toFixed(2)} ms` +
              (bad.length ? `  FAIL: ${bad.map((d) => `${d.name} ${fmt(d.rel)}${d.note ? ` (${d.note})` : ""}`).join("; ")}` : "") +
              (fdBad ? `  FAIL: d/dstate torch ${r.stateFd!.an} vs FD ${r.stateFd!.fd} (h ${r.stateFd!.h})` : ""));
          }
        }
      }
    }
    console.log("\n-- edge cases --");
    for (const edge of EDGES) {
      for (const decl of RULES) {
        if (!edge.rules.includes(decl.key)) continue;
        for (const frozen of decl.frozen === null ? [false] : [false, true]) {
          const key = frozen ? `${decl.key}.frozen` : decl.key;
          if (o.rules.length > 0 && !o.rules.includes(key) && !o.rules.includes(decl.key)) continue;
          const spec: RuleCaseSpec = { d: 4, seq_len: 4, hyper: {}, alpha: "mid", theta: "large", state: "random", seed: 77 };
          const r = await runRuleCase(br, decl, frozen, spec, edge.edit);
          const bad = r.diffs.filter((d) => !(d.rel <= o.tol));
          failures += bad.length > 0 ? 1 : 0;
          const y = group(r.diffs, "y"), st = group(r.diffs, "state."), gr = group(r.diffs, "grads.");
          const zero = r.diffs.filter((d) => d.refMax === 0 && d.abs === 0).length;
          edgeRows.push(`${edge.id.padEnd(34)} ${key.padEnd(15)} y ${cell(y).padEnd(8)} state ${cell(st).padEnd(8)} grads ${cell(gr, true).padEnd(20)} all-zero ${zero}/${r.diffs.length}  d/dstate FD ${fdCell(r.stateFd === null ? [] : [r.stateFd])}` +
            (bad.length ? `  FAIL: ${bad.map((d) => `${d.name} ${fmt(d.rel)}`).join("; ")}` : ""));
        }
      }
    }
    console.log(edgeRows.join("\n"));
    console.log(`\n${"rule".padEnd(16)}${"cases".padStart(6)}  ${"y".padEnd(9)}${"state".padEnd(22)}${"grads".padEnd(26)}${"d/dstate vs FD".padEnd(18)}ms(bridge) ms(round trip)`);
    for (const [key, a] of Object.entries(perRule)) {
      console.log(`${key.padEnd(16)}${String(a.n).padStart(6)}  ${cell(worst(a.y)).padEnd(9)}${cell(worst(a.st), true).padEnd(22)}` +
        `${cell(worst(a.gr), true).padEnd(26)}${fdCell(a.fd).padEnd(18)}${median(a.ms).toFixed(2).padStart(6)}     ${median(a.rt).toFixed(2).padStart(6)}`);
    }
    const skipped = new Set(all.flatMap((r) => r.skipped.map((s) => `${r.key}:${s.replace(/^grads\.state\..*/, "grads.state.*")}`)));
    console.log(`\nnot compared (torch only): ${[...skipped].sort().join(", ")}`);
    report.rules = Object.fromEntries(Object.entries(perRule).map(([k, a]) => [k, {
      cases: a.n, y: worst(a.y), state: worst(a.st), grads: worst(a.gr),
      // The largest reference value compared in any case: 0 would mean every comparison was vacuous.
      refMax: Math.max(0, ...[...a.y, ...a.st, ...a.gr].map((d) => (Number.isFinite(d.refMax) ? d.refMax : 0))), stateFd: fdCell(a.fd), medianMs: median(a.ms), medianRoundTripMs: median(a.rt),
    }]));
  }

  if (o.doModel) {
    console.log("\n== model cases (MAG + CMS): torch vs hand-written oracle [vs tape] ==");
    console.log(`${"case".padEnd(46)}${"loss".padEnd(9)}${"model grads".padEnd(24)}${"level grads".padEnd(26)}${"buffers".padEnd(10)}${"context".padEnd(10)}active  [tape worst]   ms`);
    const rows: unknown[] = [];
    for (const def of modelCases(o)) {
      const r = await runModelCase(br, def);
      const loss = group(r.diffs, "loss"), gm = group(r.diffs, "grads.model."), gl = group(r.diffs, "grads.levels.");
      const eb = group(r.diffs, "error_buffers."), cx = group(r.diffs, "context."), tw = worst(r.tapeDiffs);
      const bad = r.diffs.filter((d) => !(d.rel <= o.tol));
      if (bad.length > 0 || !r.activeMatch) failures++;
      console.log(`${def.id.padEnd(46)}${cell(loss).padEnd(9)}${cell(gm, true).padEnd(24)}${cell(gl, true).padEnd(26)}${cell(eb).padEnd(10)}` +
        `${cell(cx).padEnd(10)}${(r.pattern + (r.activeMatch ? "" : "≠ts")).padEnd(8)}${cell(tw).padEnd(13)}${r.ms.toFixed(1)}` +
        (bad.length ? `  FAIL: ${bad.slice(0, 4).map((d) => `${d.name} ${fmt(d.rel)}${d.note ? ` (${d.note})` : ""}`).join("; ")}` : ""));
      if (o.verbose) for (const d of r.diffs) console.log(`    ${d.name.padEnd(32)} ${fmt(d.rel)}  (max|ts| ${fmt(d.refMax)})`);
      rows.push({ id: def.id, worst: worst(r.diffs), loss, activeMatch: r.activeMatch, tapeWorst: tw, ms: r.ms });
    }
    report.model = rows;
  }

  if (o.doFixtures) {
    const dir = decodeURIComponent(new URL("../../fixtures/golden", import.meta.url).pathname);
    const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json")).sort() : [];
    let replayed = 0, skipped = 0, worstAll: Diff | null = null;
    for (const f of files) {
      const doc = JSON.parse(readFileSync(`${dir}/${f}`, "utf8"));
      const r = await replayFixture(br, doc);
      if (r === null) {
        skipped++;
        continue;
      }
      replayed++;
      const w = worst(r.diffs);
      if (w !== null && (worstAll === null || !(w.rel <= worstAll.rel))) worstAll = { ...w, name: `${f}: ${w.name}` };
      const bad = r.diffs.filter((d) => !(d.rel <= o.tol));
      if (bad.length > 0 || !r.activeMatch) {
        failures++;
        console.log(`fixture ${f}: FAIL ${bad.map((d) => `${d.name} ${fmt(d.rel)}`).join("; ")}${r.activeMatch ? "" : " active decisions differ"}`);
      } else if (o.verbose) console.log(`fixture ${f}: worst ${cell(w, true)}`);
    }
    console.log(`\n== golden fixtures (fixtures/golden): ${replayed} replayed through torch, ${skipped} f32 skipped; worst ${worstAll === null ? "-" : `${fmt(worstAll.rel)} (${worstAll.name})`}`);
    report.fixtures = { replayed, skipped, worst: worstAll };
  }

  await br.close();
  if (o.json !== null) await Bun.write(o.json, JSON.stringify(report, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v), 2));
  console.log(failures === 0 ? `\nall cases within ${o.tol}` : `\n${failures} case(s) over tolerance ${o.tol}`);
  return failures === 0 ? 0 : 1;
}

if (import.meta.main) process.exit(await main());
