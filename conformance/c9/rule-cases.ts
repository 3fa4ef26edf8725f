/** The cross-check's rule cases: generated, pinned and extreme hyper-parameters, and the edge cases, run on both sides. */
import * as fc from "fast-check";
import { buildRuleCase, clampHyper, ruleCaseSpecArb, type RuleCase, type RuleCaseSpec, type SizeLimits } from "../../cases/rule-case.ts";
import { maxAbs } from "../../src/numeric.ts";
import { frozenBackwardWithState, frozenForward, frozenForwardSaved, ruleBackwardWithState, ruleForward, ruleForwardSaved } from "../../src/rules/level.ts";
import { Rng } from "../../src/rng.ts";
import { fdDirectional } from "../../oracle/fd.ts";
import { MEMORY_RULES } from "../../src/rules/index.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { Tensor } from "../../src/tensor.ts";
import { TorchBridge, type RuleRequest } from "../../oracle/torch-bridge.ts";
import { diff, withConditioning, withFloor, type Diff } from "./compare.ts";
import { withAccumulate } from "../../src/precision.ts";
import type { Options } from "./options.ts";
import { TAPE } from "../../oracle/precision-table.ts";

export interface RuleCaseResult {
  readonly key: string;
  readonly spec: RuleCaseSpec;
  readonly diffs: Diff[];
  readonly ms: number;
  readonly roundTripMs: number;
  readonly skipped: string[];
  readonly stateFd: StateFd | null;
}

/** torch's d loss / d initial state along u vs central differences (with a Richardson step) of the TS forward. */
export interface StateFd {
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
export const FD_RTOL = TAPE.finiteDifferences.value.rtol, FD_ATOL = TAPE.finiteDifferences.value.atol;

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

export function ruleSpecs(decl: RuleDecl, o: Options, frozen: boolean): RuleCaseSpec[] {
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

export async function runRuleCase(br: TorchBridge, decl: RuleDecl, frozen: boolean, spec: RuleCaseSpec,
  edit?: (c: RuleCase) => void, tol = 1e-10, torchSide: (req: RuleRequest) => RuleRequest = (req) => req): Promise<RuleCaseResult> {
  const c = buildRuleCase(decl, spec, "f64", frozen);
  edit?.(c);
  const { y, finalState, grads, dState } = tsRun(decl, frozen, c);
  // A case from the rule's init sends no state: torch then starts from its own D4 init (init hash).
  const sendState = spec.state === "init" && edit === undefined ? undefined : c.state;
  // torchSide is the identity except where a test plants a bug on the torch side only.
  const t = await br.runRule(torchSide({ rule: decl.key, frozen, config: c.cfg, X: c.X, dy: c.dy, params: c.params, state: sendState }));
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
  return { key: frozen ? `${decl.key}.frozen` : decl.key, spec, diffs: withConditioning(withFloor(diffs), orderSpread(decl, frozen, c, { y, finalState, grads, dState }), tol),
    ms: t.ms, roundTripMs: t.roundTripMs, skipped, stateFd };
}

interface TsResult { y: Tensor; finalState: Readonly<Record<string, Tensor>>; grads: Record<string, Tensor>; dState: Record<string, Tensor> }

/** The TypeScript reference's side of a case: forward, hand-written backward, initial-state gradient. */
function tsRun(decl: RuleDecl, frozen: boolean, c: RuleCase): TsResult {
  // torch differentiates sum(y ⊙ dy) only, so the TS state gradient is taken with no dFinal.
  if (frozen) {
    const r = frozenForwardSaved(decl, c.X, c.params, c.state, c.cfg);
    const g = frozenBackwardWithState(decl, r.saved, c.dy, c.cfg);
    return { y: r.y, finalState: c.state, grads: { X: g.X, W_Q: g.W_Q }, dState: g.dState };
  }
  const r = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg);
  const g = ruleBackwardWithState(decl, r.saved, c.dy, c.cfg);
  return { y: r.y, finalState: r.finalState, grads: g.grads, dState: g.dState0 };
}

/**
 * The case's conditioning (docs/spec/conformance.md#c9-conditioning): the TypeScript reference run
 * again with every sum taken in reverse order, an equally correct f64 computation. Returns, per
 * compared tensor, its relative difference from the natural order (floored as the comparison is):
 * how far rounding alone moves that tensor in this case.
 */
function orderSpread(decl: RuleDecl, frozen: boolean, c: RuleCase, base: TsResult): Map<string, number> {
  const p = withAccumulate("f64", () => tsRun(decl, frozen, c), "reversed");
  const ds: Diff[] = [diff("y", p.y, base.y)];
  for (const [n, ref] of Object.entries(base.finalState)) ds.push(diff(`state.${n}`, p.finalState[n], ref));
  for (const [n, ref] of Object.entries(base.grads)) ds.push(diff(`grads.${n}`, p.grads[n], ref));
  for (const [n, ref] of Object.entries(base.dState)) ds.push(diff(`grads.state.${n}`, p.dState[n], ref));
  return new Map(withFloor(ds).filter((d) => Number.isFinite(d.rel)).map((d) => [d.name, d.rel]));
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

export const EDGES: readonly Edge[] = [
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
