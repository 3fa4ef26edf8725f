/**
 * C3 — the CMS model on the tape vs the hand-written model backward
 * (docs/spec/conformance.md#c3), for every composition (MAG, MAC, MAL), every rule and mixed
 * levels, k ∈ {1, 2, 4}, every active/frozen pattern.
 */
import { cmsStep } from "../../oracle/cms-backward.ts";
import { TOL_ULP } from "../../oracle/compare.ts";
import { compareSteps } from "../../oracle/model-compare.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { tapeStep } from "../../src/model/step.ts";
import { buildModelCase, type ModelCaseSpec } from "../../cases/model-case.ts";
import {
  COMPOSITIONS, FIXED, KS, SIZES, compositionId, compositionSubject, patterns, specArb, targets, type Composition, type Pattern,
} from "../../cases/model-arb.ts";

const RUNS_C3: ProfileRuns = { quick: 1, default: 3, deep: 30 };
const SPEC_C3: Record<Composition, string> = {
  mag: "docs/spec/conformance.md#c3; docs/spec/titans-family.md#mag-backward, docs/spec/titans-family.md#cms-combine, docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d11, docs/spec/decisions.md#d12, docs/spec/decisions.md#d13",
  mac: "docs/spec/conformance.md#c3; docs/spec/composition.md#mac-backward, docs/spec/composition.md#mac-frozen, docs/spec/composition.md#gate-and-buffers; docs/spec/decisions.md#d11, docs/spec/decisions.md#d13, docs/spec/decisions.md#d17",
  mal: "docs/spec/conformance.md#c3; docs/spec/composition.md#mal-backward, docs/spec/composition.md#gate-and-buffers; docs/spec/decisions.md#d11, docs/spec/decisions.md#d13, docs/spec/decisions.md#d17",
};

function c3Case(spec: ModelCaseSpec, p: Pattern): CaseOutcome {
  const c = buildModelCase(spec);
  const got = tapeStep(c.model, c.params, c.batch, p.active, c.context);
  const want = cmsStep(c.model, c.params, c.batch, p.active, c.context);
  return fromComparison(compareSteps(c.model, got, want));
}

export function c3Checks(): CheckDef[] {
  const checks: CheckDef[] = [];
  const tolerance = { kind: "tape-vs-hand-written", loss: "bitwise", ...TOL_ULP, buffers: "same bound", unused: "exactly 0" };
  for (const comp of COMPOSITIONS) {
    for (const t of targets()) {
      for (const k of t.key === "mixed" ? KS.filter((k) => k > 1) : KS) {
        for (const p of patterns(k)) {
          checks.push({
            kind: "property", id: `C3/${compositionId(comp)}${t.key}/k${k}/${p.name}`, class: "C3",
            subject: { ...t.subject(k, p), ...compositionSubject(comp), dtype: "f64" }, spec: SPEC_C3[comp], tolerance,
            runs: RUNS_C3, arb: specArb(t.rules(k), SIZES, FIXED, "random", comp), run: (s: ModelCaseSpec) => c3Case(s, p),
          });
        }
      }
    }
  }
  return checks;
}
