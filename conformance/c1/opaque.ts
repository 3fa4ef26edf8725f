/**
 * C1 — opaque isolation (docs/spec/conformance.md#c1, docs/spec/tape.md#opaque): every rule variant
 * recorded as one opaque block gives exactly (bitwise) its registered backward, the state's
 * gradient included (docs/spec/state-gradients.md#checks); nothing reaches
 * saved buffers; the tape's snapshots ignore later mutation of the originals.
 */
import { bitwiseEqual, compareTensors } from "../../oracle/compare.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { frozenBackward, frozenForwardSaved, paramNames, ruleBackward, ruleForwardSaved } from "../../src/rules/level.ts";
import { buildRuleCase, type RuleCase, type RuleCaseSpec } from "../../cases/rule-case.ts";
import { forwardY, gradNames, handGrads, tapeGrads, variantCaseArb, variants, vkey, type TapeRun, type Variant } from "../../cases/rule-variant.ts";

const RUNS_C1: ProfileRuns = { quick: 5, default: 20, deep: 200 };

function c1Case(v: Variant, spec: RuleCaseSpec): CaseOutcome {
  const c = buildRuleCase(v.decl, spec, "f64", v.frozen);
  // The direct backward reads the caller's state tensors (the tape run reads its snapshots).
  const stateBefore = Object.fromEntries(Object.entries(c.state).map(([n, t]) => [n, t.data.slice()]));
  const hand = handGrads(v, c);
  for (const [n, before] of Object.entries(stateBefore)) {
    if (bitwiseEqual(c.state[n]!.data, before) !== -1) return { ok: false, message: `state ${n} was written by the rule` };
  }
  // The originals (state included) are mutated after recording: the tape's snapshots must not see it.
  const originals = [c.X, ...Object.values(c.params), ...Object.values(c.state)];
  const backup = originals.map((t) => t.data.slice());
  let run: TapeRun;
  try {
    run = tapeGrads(v, c, () => originals.forEach((t) => { for (let i = 0; i < t.size; i++) t.data[i]! += 0.5; }));
  } finally {
    originals.forEach((t, i) => t.data.set(backup[i]!));
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
  if (!r.ok) return fromComparison(r);
  for (const n of paramNames(v.decl)) {
    if (gradNames(v).includes(n)) continue;
    const g = run.grads[n];
    if (g !== null && g !== undefined && g.data.some((x) => x !== 0)) return { ok: false, message: `unused parameter ${n} received a non-zero gradient` };
  }
  return fromComparison(r);
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

export function c1Checks(): CheckDef[] {
  return variants().map((v): CheckDef => ({
    kind: "property", id: `C1/${vkey(v)}`, class: "C1", subject: { rule: v.decl.key, frozen: v.frozen, dtype: "f64" },
    spec: `docs/spec/conformance.md#c1; docs/spec/tape.md#opaque; docs/spec/state-gradients.md#checks; ${v.decl.sheet}`,
    tolerance: { kind: "bitwise", rtol: 0, atol: 0 },
    runs: RUNS_C1, arb: variantCaseArb(v),
    run: (spec: RuleCaseSpec) => checkSavedUntouched(v, buildRuleCase(v.decl, spec, "f64", v.frozen)) ?? c1Case(v, spec),
  }));
}
