/**
 * C2 for the model (docs/spec/conformance.md#c2): tape gradients of the model's cross entropy (MAG, MAC,
 * MAL) vs central finite differences: the full Jacobian on tiny k = 1 shapes, random directions on
 * the frozen patterns.
 */
import { TOL_FD, VACUITY_FACTOR } from "../../oracle/compare.ts";
import { FD_METHOD } from "../../oracle/fd.ts";
import { gradCheck } from "../../oracle/gradcheck.ts";
import { levelGradNames } from "../../oracle/model-compare.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { modelParamNames } from "../../src/model/config.ts";
import { modelForward } from "../../src/model/forward.ts";
import { tapeStep, type StepResult } from "../../src/model/step.ts";
import { maxAbs } from "../../src/numeric.ts";
import type { Tensor } from "../../src/tensor.ts";
import { buildModelCase, type ModelCase, type ModelCaseSpec } from "../../cases/model-case.ts";
import {
  COMPOSITIONS, FIXED, KS, SIZES, TINY, compositionId, compositionSubject, patterns, specArb, targets, type Composition, type Pattern,
} from "../../cases/model-arb.ts";

const RUNS_C2: ProfileRuns = { quick: 1, default: 2, deep: 20 };
/** Above this many parameter elements the model C2 uses random directions. */
const FULL_FD_MAX = 260;
const DIRECTIONS = 3;
const SPEC_C2: Record<Composition, string> = {
  mag: "docs/spec/conformance.md#c2 (MAG cross entropy); docs/spec/titans-family.md#mag; docs/spec/decisions.md#d2, docs/spec/decisions.md#d12",
  mac: "docs/spec/conformance.md#c2 (MAC cross entropy); docs/spec/composition.md#mac, docs/spec/composition.md#persistent; docs/spec/decisions.md#d2, docs/spec/decisions.md#d12",
  mal: "docs/spec/conformance.md#c2 (MAL cross entropy); docs/spec/composition.md#mal; docs/spec/decisions.md#d2, docs/spec/decisions.md#d12",
};

interface Differentiated {
  readonly name: string;
  readonly group: string;
  readonly tensor: Tensor;
  readonly grad: Tensor;
}

/** The parameters the loss depends on, with the tape's gradient (a frozen W_Q's is its buffer). */
function differentiated(c: ModelCase, r: StepResult): Differentiated[] {
  const mp = c.params.model as Record<string, Tensor>, gm = r.grads.model as Record<string, Tensor>;
  const out: Differentiated[] = modelParamNames(c.model).map((n) => ({ name: n, group: "model", tensor: mp[n]!, grad: gm[n]! }));
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
  const loss = () => modelForward(c.model, c.params, c.batch, p.active, c.context).loss.data[0]!;
  // Vacuity is judged per group below, so the per-tensor floor is off.
  const cmp = gradCheck(loss, ds.map((d) => ({ name: d.name, tensor: d.tensor, grad: d.grad.data })),
    { fullMax: FULL_FD_MAX, directions: DIRECTIONS, seed: spec.seed ^ 0x2545f491, floor: 0 });
  if (!cmp.ok) return fromComparison(cmp);
  const flat = groupVacuity(ds);
  return flat === null ? { ok: true, worst: cmp.worst, ...(cmp.details ? { details: cmp.details } : {}) } : { ok: false, vacuous: true, worst: cmp.worst, message: flat };
}

export function c2ModelChecks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const comp of COMPOSITIONS) for (const t of targets()) {
    for (const k of t.key === "mixed" ? KS.filter((k) => k > 1) : KS) {
      const p = k === 1 ? patterns(1)[0]! : k === 2 ? patterns(2)[1]! : patterns(4).find((p) => p.name === "step-8")!;
      checks.push({
        kind: "property", id: `C2/model/${compositionId(comp)}${t.key}/k${k}/${p.name}`, class: "C2", subject: { ...t.subject(k, p), ...compositionSubject(comp), dtype: "f64" },
        spec: SPEC_C2[comp],
        tolerance: {
          kind: "finite-differences", ...TOL_FD, ...FD_METHOD, full_max_elements: FULL_FD_MAX, directions: DIRECTIONS,
          vacuity: "per group (model, each level): max |grad| >= 100·atol",
        },
        runs: RUNS_C2, arb: specArb(t.rules(k), k === 1 ? TINY : SIZES, FIXED, "random", comp), run: (s: ModelCaseSpec) => c2Case(s, p),
      });
    }
  }
  return checks;
}
