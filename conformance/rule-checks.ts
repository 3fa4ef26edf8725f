/**
 * C1, C2 and C8 for every rule of the registry, its frozen variant, and SWA
 * (docs/spec/conformance.md; rules-*.md). Generated from the declarations: nothing here is per rule.
 */
import { bitwiseEqual, compareTensors, TOL_FD, type Comparison } from "../oracle/compare.ts";
import { FD_METHOD } from "../oracle/fd.ts";
import { gradCheck } from "../oracle/gradcheck.ts";
import type { CaseOutcome, CheckDef, Profile } from "../harness/check.ts";
import { RULES } from "../src/rules/index.ts";
import {
  frozenBackward, frozenForward, frozenForwardSaved, paramNames, ruleBackward, ruleForward, ruleForwardSaved, usedParams,
} from "../src/rules/level.ts";
import type { RuleDecl } from "../src/rules/types.ts";
import { withTape } from "../src/tape.ts";
import { Tensor, zeros } from "../src/tensor.ts";
import { buildRuleCase, ruleCaseSpecArb, type RuleCase, type RuleCaseSpec } from "../cases/rule-case.ts";

const RUNS_C1: Record<Profile, number> = { quick: 5, default: 20, deep: 200 };
const RUNS_C2: Record<Profile, number> = { quick: 4, default: 15, deep: 150 };
/** Above this many input elements C2 uses random directions (then the full Jacobian on failure). */
const FULL_FD_MAX = 400;
const DIRECTIONS = 3;

type Variant = { decl: RuleDecl; frozen: boolean };

function variants(): Variant[] {
  const out: Variant[] = [];
  for (const decl of RULES) {
    out.push({ decl, frozen: false });
    if (decl.frozen !== null) out.push({ decl, frozen: true });
  }
  return out;
}

function vkey(v: Variant): string {
  return v.frozen ? `${v.decl.key}.frozen` : v.decl.key;
}

/** Tensors that receive gradient in this variant (the frozen read: only X and W_Q, D3). */
function gradNames(v: Variant): string[] {
  return v.frozen ? ["X", "W_Q"] : ["X", ...usedParams(v.decl)];
}

function tensorOf(c: RuleCase, name: string): Tensor {
  return name === "X" ? c.X : c.params[name]!;
}

function forwardY(v: Variant, c: RuleCase): Tensor {
  return v.frozen ? frozenForward(v.decl, c.X, c.params, c.state, c.cfg) : ruleForward(v.decl, c.X, c.params, c.state, c.cfg).y;
}

/** Hand-written backward of the variant, called directly (no tape). */
function handGrads(v: Variant, c: RuleCase): Record<string, Tensor> {
  if (v.frozen) {
    const r = frozenForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
    return frozenBackward(v.decl, r.saved, c.dy, c.cfg);
  }
  const r = ruleForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
  return ruleBackward(v.decl, r.saved, c.dy, c.cfg);
}

interface TapeRun {
  y: Tensor;
  grads: Record<string, Tensor | null>;
}

/** The variant recorded as one opaque block and back-propagated from dy. `mutate` runs between record and backward. */
function tapeGrads(v: Variant, c: RuleCase, mutate?: () => void): TapeRun {
  return withTape((tape) => {
    const X = tape.input(c.X);
    const params: Record<string, Tensor> = {};
    for (const n of paramNames(v.decl)) params[n] = tape.param(c.params[n]!);
    const y = v.frozen ? frozenForward(v.decl, X, params, c.state, c.cfg) : ruleForward(v.decl, X, params, c.state, c.cfg).y;
    if (tape.length !== 1) throw new Error(`expected ONE opaque block on the tape, found ${tape.length} entries`);
    mutate?.();
    tape.backward(y, c.dy);
    const grads: Record<string, Tensor | null> = { X: tape.grad(X) };
    for (const n of paramNames(v.decl)) grads[n] = tape.grad(params[n]!);
    return { y, grads };
  });
}

const out = (r: Comparison): CaseOutcome => ({ ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message });

// ── C1: opaque isolation ────────────────────────────────────────────────────

function c1Case(v: Variant, spec: RuleCaseSpec): CaseOutcome {
  const c = buildRuleCase(v.decl, spec, "f64", v.frozen);
  const hand = handGrads(v, c);
  const stateBefore = Object.fromEntries(Object.entries(c.state).map(([n, t]) => [n, t.data.slice()]));
  // The originals are mutated after recording: the tape's snapshots must not see it.
  const originals = [c.X, ...Object.values(c.params)];
  const backup = originals.map((t) => t.data.slice());
  let run: TapeRun;
  try {
    run = tapeGrads(v, c, () => originals.forEach((t) => { for (let i = 0; i < t.size; i++) t.data[i]! += 0.5; }));
  } finally {
    originals.forEach((t, i) => t.data.set(backup[i]!));
  }
  for (const [n, before] of Object.entries(stateBefore)) {
    if (bitwiseEqual(c.state[n]!.data, before) !== -1) return { ok: false, message: `state ${n} was written by the rule` };
  }
  const plainY = forwardY(v, c);
  if (bitwiseEqual(plainY.data, run.y.data) !== -1) return { ok: false, message: "traced y differs from untraced y" };
  const got: Record<string, ArrayLike<number>> = {}, want: Record<string, ArrayLike<number>> = {};
  for (const n of gradNames(v)) {
    const g = run.grads[n];
    if (g === null || g === undefined) return { ok: false, message: `no tape gradient reached ${n}` };
    got[n] = g.data;
    want[n] = hand[n]!.data;
  }
  // Bitwise in f64: the tape must call the registered backward and add nothing of its own.
  const r = compareTensors(got, want, { rtol: 0, atol: 0 }, 1e-6);
  if (!r.ok) return out(r);
  for (const n of paramNames(v.decl)) {
    if (gradNames(v).includes(n)) continue;
    const g = run.grads[n];
    if (g !== null && g !== undefined && g.data.some((x) => x !== 0)) return { ok: false, message: `unused parameter ${n} received a non-zero gradient` };
  }
  return out(r);
}

function checkSavedUntouched(v: Variant, c: RuleCase): CaseOutcome | null {
  // Nothing reaches saved buffers: the backward must not write into what forward saved.
  const saved = v.frozen ? frozenForwardSaved(v.decl, c.X, c.params, c.state, c.cfg).saved : ruleForwardSaved(v.decl, c.X, c.params, c.state, c.cfg).saved;
  const before = Object.fromEntries(Object.entries(saved).map(([n, t]) => [n, t.data.slice()]));
  if (v.frozen) frozenBackward(v.decl, saved, c.dy, c.cfg);
  else ruleBackward(v.decl, saved, c.dy, c.cfg);
  for (const [n, b] of Object.entries(before)) {
    if (bitwiseEqual(saved[n]!.data, b) !== -1) return { ok: false, message: `backward wrote into saved tensor '${n}'` };
  }
  return null;
}

// ── C2: finite differences ──────────────────────────────────────────────────

function lossOf(v: Variant, c: RuleCase): () => number {
  return () => {
    const y = forwardY(v, c);
    let s = 0;
    for (let i = 0; i < y.size; i++) s += y.data[i]! * c.dy.data[i]!;
    return s;
  };
}

function c2Case(v: Variant, spec: RuleCaseSpec): CaseOutcome {
  const c = buildRuleCase(v.decl, spec, "f64", v.frozen);
  const { grads } = tapeGrads(v, c);
  for (const n of gradNames(v)) if (grads[n] === null) return { ok: false, message: `no tape gradient reached ${n}` };
  for (const n of paramNames(v.decl)) {
    if (gradNames(v).includes(n)) continue;
    const g = grads[n];
    if (g !== null && g !== undefined && g.data.some((x) => x !== 0)) return { ok: false, message: `unused parameter ${n}: gradient must be exactly 0` };
  }
  const ds = gradNames(v).map((n) => ({ name: n, tensor: tensorOf(c, n), grad: grads[n]!.data }));
  return out(gradCheck(lossOf(v, c), ds, { fullMax: FULL_FD_MAX, directions: DIRECTIONS, seed: spec.seed ^ 0x5bd1e995 }));
}

// ── C8: invariants ──────────────────────────────────────────────────────────

function zeroStateRead(decl: RuleDecl): CaseOutcome {
  const cfg = buildRuleCase(decl, { d: 5, seq_len: 3, hyper: {}, alpha: "mid", theta: "small", state: "init", seed: 7 });
  const state: Record<string, Tensor> = {};
  for (const [n, shape] of Object.entries(decl.stateShapes(cfg.cfg))) state[n] = zeros("f64", shape);
  const y = frozenForward(decl, cfg.X, cfg.params, state, cfg.cfg);
  const i = y.data.findIndex((x) => x !== 0);
  return i === -1 ? { ok: true } : { ok: false, message: `y[${i}] = ${y.data[i]} from an all-zero state` };
}

export function ruleChecks(): CheckDef<any>[] {
  const checks: CheckDef<any>[] = [];
  for (const v of variants()) {
    const key = vkey(v);
    const subject = { rule: v.decl.key, frozen: v.frozen };
    // A frozen read of a zero state reads zero (a C8 fact, vacuous as a gradient check), and
    // several rules start from zeros (D4): frozen variants read random states.
    const arb = v.frozen ? ruleCaseSpecArb(v.decl).map((s) => ({ ...s, state: "random" as const })) : ruleCaseSpecArb(v.decl);
    checks.push({
      id: `C1/${key}`, class: "C1", subject,
      spec: `docs/spec/conformance.md#c1; docs/spec/tape.md#opaque blocks; ${v.decl.sheet}`,
      tolerance: { kind: "bitwise", rtol: 0, atol: 0 },
      runs: RUNS_C1, arb,
      run: (spec: RuleCaseSpec) => checkSavedUntouched(v, buildRuleCase(v.decl, spec, "f64", v.frozen)) ?? c1Case(v, spec),
    });
    checks.push({
      id: `C2/${key}`, class: "C2", subject,
      spec: `docs/spec/conformance.md#c2 (loss sum(y*dy)); ${v.decl.sheet}; docs/spec/decisions.md#d2`,
      tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, full_max_elements: FULL_FD_MAX, directions: DIRECTIONS },
      runs: RUNS_C2, arb,
      run: (spec: RuleCaseSpec) => c2Case(v, spec),
    });
    if (v.frozen) {
      checks.push({
        id: `C8/${key}/zero-state-reads-zero`, class: "C8", subject,
        spec: "docs/spec/conformance.md#c8; rules sheets (a zero frozen memory reads zero)",
        tolerance: { kind: "exact" }, run: () => zeroStateRead(v.decl),
      });
    } else {
      for (const inv of v.decl.invariants) {
        const slug = inv.name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
        checks.push({
          id: `C8/${key}/${slug}`, class: "C8", subject, spec: inv.spec, tolerance: { kind: "invariant" },
          run: () => {
            const msg = inv.check("f64", 1);
            return msg === null ? { ok: true } : { ok: false, message: msg };
          },
        });
      }
    }
  }
  return checks;
}
