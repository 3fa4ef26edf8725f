/** The C7 checks, generated from the registry, the compositions (MAG, MAC, MAL) and k ∈ {1, 2, 4}. */
import type { CheckDef, ProfileRuns } from "../../harness/check.ts";
import { TOL_FD, TOL_ULP } from "../../oracle/compare.ts";
import { cmsStep } from "../../oracle/cms-backward.ts";
import { tapeStep } from "../../src/model/step.ts";
import type { MemoryRuleKey } from "../../src/rules/index.ts";
import type { ModelCaseSpec } from "../../cases/model-case.ts";
import {
  COMPOSITIONS, KS, LEARNED, SIZES, compositionId, compositionSubject, fixedSpec, levelRules, specArb, targets, type Composition,
} from "../../cases/model-arb.ts";
import { learnedGateCase } from "./learned-gate.ts";
import { LR, TRAJECTORY_RTOL, errorBufferCase, lossDecreases, pulseSchedule, trajectoryCase } from "./loops.ts";

const RUNS_GATE: ProfileRuns = { quick: 1, default: 3, deep: 30 };

/** The spec anchors a composition's C7 checks add (none for MAG, whose ids and texts predate the field). */
function compSpec(comp: Composition): string {
  return comp === "mag" ? "" : `; docs/spec/composition.md#${comp}, docs/spec/composition.md#gate-and-buffers`;
}

export function c7Checks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const comp of COMPOSITIONS) checks.push(...compositionChecks(comp));
  for (const k of KS) {
    checks.push({
      kind: "single", id: `C7/pulse/k${k}`, class: "C7", subject: { k, levels: "scheduled" }, spec: "docs/spec/titans-family.md#cms-pulse; docs/spec/decisions.md#d11",
      tolerance: { kind: "exact", steps: 600 }, run: () => pulseSchedule(k),
    });
  }
  return checks;
}

/** Every C7 check that runs a model, for one composition. */
function compositionChecks(comp: Composition): CheckDef[] {
  const checks: CheckDef[] = [];
  const id = compositionId(comp), subj = compositionSubject(comp), extra = compSpec(comp);
  const over = comp === "mag" ? {} : { pattern: comp };
  for (const t of targets()) {
    for (const k of t.key === "mixed" ? KS.filter((k) => k > 1) : KS) {
      checks.push({
        kind: "single", id: `C7/build-loop/${id}${t.key}/k${k}`, class: "C7", subject: { rule: t.key, k, levels: k > 1 ? "scheduled" : "all-active", ...subj, dtype: "f64" },
        spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers (training loop); docs/spec/decisions.md#d13" + extra,
        tolerance: { kind: "trajectory", step0: "bitwise", rtol: TRAJECTORY_RTOL, steps: 10, reason: "after step 0 the two paths' parameters differ by ULPs, which the loss carries forward" },
        run: () => trajectoryCase(fixedSpec(levelRules(t.key, k), 101 + k, over), 10),
      });
      if (k > 1) {
        checks.push({
          kind: "property", id: `C7/learned-gate/${id}${t.key}/k${k}`, class: "C7", subject: { rule: t.key, k, levels: "learned", ...subj, dtype: "f64" },
          spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10 (straight-through, true sign)" + extra,
          tolerance: {
            kind: "tape-vs-hand-written", ...TOL_ULP,
            sign: { kind: "finite-differences", ...TOL_FD, compared: "dg_l = <dSum, y_l> per level", vacuity: "max_l |dg_l| >= 100·atol" },
          },
          runs: RUNS_GATE, arb: specArb(t.rules(k), SIZES, LEARNED, "random", comp), run: (s: ModelCaseSpec) => learnedGateCase(s),
        });
      }
    }
    if (t.key !== "mixed") {
      checks.push({
        kind: "single", id: `C7/error-buffers/${id}${t.key}/k2`, class: "C7", subject: { rule: t.key, k: 2, levels: "scheduled", ...subj, dtype: "f64" },
        spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d13" + extra,
        tolerance: { kind: "exact", steps: 9, chunk_sizes: [1, 8] },
        run: () => errorBufferCase(fixedSpec(levelRules(t.key, 2), 211, over), 9, tapeStep),
      });
      checks.push({
        kind: "single", id: `C7/loss-decreases/${id}${t.key}/k1`, class: "C7", subject: { rule: t.key, k: 1, levels: "all-active", ...subj, dtype: "f64" },
        spec: "docs/spec/conformance.md#c7 (smoke: forward, tape backward, SGD, advance); docs/spec/titans-family.md#mag-backward" + extra,
        tolerance: { kind: "smoke", steps: 50, lr: LR, criterion: "trained parameters lower the first step's loss (same batch, initial context)" },
        run: () => lossDecreases(fixedSpec([t.key as MemoryRuleKey], 307, over)),
      });
    }
  }
  // Several levels buffering at once, on both paths, with short chunks so every level cycles.
  for (const [name, stepper] of [["tape", tapeStep], ["hand-written", cmsStep]] as const) {
    checks.push({
      kind: "single", id: `C7/error-buffers/${id}mixed/k4/${name}`, class: "C7", subject: { rule: "mixed", k: 4, levels: "scheduled", ...subj, dtype: "f64" },
      spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers; docs/spec/decisions.md#d13" + extra,
      tolerance: { kind: "exact", steps: 9, chunk_sizes: [1, 2, 3, 4] },
      run: () => errorBufferCase(fixedSpec(["delta", "moneta", "lattice", "trellis"], 223, { context: "random", chunk_sizes: [1, 2, 3, 4], ...over }), 9, stepper),
    });
  }
  checks.push({
    kind: "single", id: `C7/build-loop/${id}mixed/k4/learned`, class: "C7", subject: { rule: "mixed", k: 4, levels: "learned", ...subj, dtype: "f64" },
    spec: "docs/spec/conformance.md#c7; docs/spec/titans-family.md#cms-error-buffers, docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10, docs/spec/decisions.md#d13" + extra,
    tolerance: { kind: "trajectory", step0: "bitwise", rtol: TRAJECTORY_RTOL, steps: 10 },
    run: () => trajectoryCase(fixedSpec(["titans", "yaad", "atlas", "memora"], 131, { freq: LEARNED, context: "random", ...over }), 10),
  });
  return checks;
}
