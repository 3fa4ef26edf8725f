/**
 * C2 for rules (docs/spec/conformance.md#c2): tape gradients of every rule variant vs central
 * finite differences of sum(y ⊙ dy) + sum(final state ⊙ dFinal), the state's gradient included
 * (docs/spec/state-gradients.md#checks): the full Jacobian on small shapes, random directions on larger.
 */
import { TOL_FD, worse } from "../../oracle/compare.ts";
import { FD_METHOD } from "../../oracle/fd.ts";
import { gradCheck } from "../../oracle/gradcheck.ts";
import { powerDetails } from "../../oracle/compare.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { paramNames } from "../../src/rules/level.ts";
import { buildRuleCase, type RuleCaseSpec } from "../../cases/rule-case.ts";
import { gradNames, isStateGradName, lossOf, tapeGrads, tensorOf, variantCaseArb, variants, vkey, type Variant } from "../../cases/rule-variant.ts";

const RUNS_C2: ProfileRuns = { quick: 4, default: 15, deep: 150 };
/** Above this many input elements C2 uses random directions (then the full Jacobian on failure). */
const FULL_FD_MAX = 400;
const DIRECTIONS = 3;

function c2Case(v: Variant, spec: RuleCaseSpec): CaseOutcome {
  const c = buildRuleCase(v.decl, spec, "f64", v.frozen);
  const { grads } = tapeGrads(v, c);
  for (const n of gradNames(v)) if (grads[n] === null) return { ok: false, message: `no tape gradient reached ${n}` };
  for (const n of paramNames(v.decl)) {
    if (gradNames(v).includes(n)) continue;
    const g = grads[n];
    if (g !== null && g !== undefined && g.data.some((x) => x !== 0)) return { ok: false, message: `unused parameter ${n}: gradient must be exactly 0` };
  }
  const d = (n: string) => ({ name: n, tensor: tensorOf(c, n), grad: grads[n]!.data });
  const loss = lossOf(v, c);
  const inputs = gradCheck(loss, gradNames(v).filter((n) => !isStateGradName(n)).map(d),
    { fullMax: FULL_FD_MAX, directions: DIRECTIONS, seed: spec.seed ^ 0x5bd1e995 });
  // The state is differentiated from random states only (the D4 init states sit where the state
  // gradient, though exact, is ill-conditioned for differences), element by element: a state is at
  // most a few hundred entries, and a joint direction through every tensor would cross more
  // kinks (YAAD's Huber clip) within one step (docs/spec/state-gradients.md#checks).
  const stateNames = gradNames(v).filter(isStateGradName);
  if (!inputs.ok || spec.state !== "random" || stateNames.length === 0) return fromComparison(inputs);
  const state = gradCheck(loss, stateNames.map(d), { fullMax: Infinity, directions: 0, seed: 0 });
  if (!state.ok) return fromComparison(state);
  return { ok: true, vacuous: false, worst: worse(inputs.worst, state.worst), details: mergePower(inputs.details, state.details) };
}

// ── C8: invariants ──────────────────────────────────────────────────────────

export function c2RuleChecks(): CheckDef[] {
  return variants().map((v): CheckDef => ({
    kind: "property", id: `C2/${vkey(v)}`, class: "C2", subject: { rule: v.decl.key, frozen: v.frozen, dtype: "f64" },
    spec: `docs/spec/conformance.md#c2 (loss sum(y*dy) + sum(final*dFinal)); docs/spec/state-gradients.md#checks; ${v.decl.sheet}; docs/spec/decisions.md#d2`,
    tolerance: { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, full_max_elements: FULL_FD_MAX, directions: DIRECTIONS },
    runs: RUNS_C2, arb: variantCaseArb(v),
    run: (spec: RuleCaseSpec) => c2Case(v, spec),
  }));
}

/** The inputs' and the state's comparison details as one (their per-tensor powers together, docs/spec/precision.md#power-fd). */
function mergePower(a: Readonly<Record<string, unknown>> | undefined, b: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> | undefined {
  const tensors = (d: typeof a) => ((d?.power as { tensors?: Record<string, { power: number | null }> } | undefined)?.tensors ?? {});
  const all = { ...tensors(a), ...tensors(b) };
  return { ...a, ...b, ...powerDetails(Object.fromEntries(Object.entries(all).map(([n, t]) => [n, t.power]))) };
}
