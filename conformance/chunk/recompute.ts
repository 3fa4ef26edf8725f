/**
 * Recompute parity (docs/spec/chunk-forms.md#recompute, docs/spec/tape.md#recompute): for every
 * rule variant and save policy, the tape's gradients with the block's recompute plan are BITWISE
 * those of store-all, the forward output is bitwise the same, and the tape holds fewer bytes.
 */
import * as fc from "fast-check";
import { bitwiseEqual, compareTensors } from "../../oracle/compare.ts";
import { fromComparison, type CaseOutcome, type CheckDef, type ProfileRuns } from "../../harness/check.ts";
import { STORE_ALL, type SavePolicy } from "../../src/recompute.ts";
import type { DType } from "../../src/tensor.ts";
import { paramNames } from "../../src/rules/level.ts";
import { buildRuleCase, type RuleCaseSpec } from "../../cases/rule-case.ts";
import { gradNames, tapeGrads, variantCaseArb, variants, vkey, type Variant } from "../../cases/rule-variant.ts";

const RUNS: ProfileRuns = { quick: 3, default: 10, deep: 100 };

/** The policies checked: recompute from the start, and checkpoints every C tokens (C generated). */
const POLICY_KINDS = ["recompute", "checkpoint"] as const;

/** f64 and f32: the producers rerun the same code, so parity holds bit for bit in both dtypes. */
function recomputeCase(v: Variant, spec: RuleCaseSpec, policy: SavePolicy): CaseOutcome {
  const f32 = recomputeCaseIn(v, spec, policy, "f32");
  if (!f32.ok && !f32.vacuous) return { ...f32, message: `f32: ${f32.message}` };
  return recomputeCaseIn(v, spec, policy, "f64");
}

function recomputeCaseIn(v: Variant, spec: RuleCaseSpec, policy: SavePolicy, dtype: DType): CaseOutcome {
  const c = buildRuleCase(v.decl, spec, dtype, v.frozen);
  // the state stays off the tape: recompute plans cover the rule blocks, not the +state blocks
  const kept = tapeGrads(v, c, undefined, STORE_ALL, false);
  const rebuilt = tapeGrads(v, c, undefined, policy, false);
  const iy = bitwiseEqual(rebuilt.y.data, kept.y.data);
  if (iy !== -1) return { ok: false, message: `y[${iy}] differs from store-all: ${rebuilt.y.data[iy]} vs ${kept.y.data[iy]}` };
  const got: Record<string, ArrayLike<number>> = {}, want: Record<string, ArrayLike<number>> = {};
  for (const n of ["X", ...paramNames(v.decl)]) {
    const a = rebuilt.grads[n] ?? null, b = kept.grads[n] ?? null;
    if ((a === null) !== (b === null)) return { ok: false, message: `gradient of ${n} reached under one policy only` };
    if (a === null || b === null) continue;
    // Unused parameters (exactly zero under both) are compared bitwise but not counted as evidence.
    if (!gradNames(v).includes(n)) {
      const i = bitwiseEqual(a.data, b.data);
      if (i !== -1) return { ok: false, message: `unused ${n}[${i}] differs from store-all` };
      continue;
    }
    got[n] = a.data;
    want[n] = b.data;
  }
  if (rebuilt.bytes > kept.bytes) return { ok: false, message: `the tape holds ${rebuilt.bytes} bytes under the policy, more than store-all's ${kept.bytes}` };
  return fromComparison(compareTensors(got, want, { rtol: 0, atol: 0 }, 1e-6));
}

export function recomputeChecks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const v of variants()) {
    for (const kind of POLICY_KINDS) {
      const arb = fc.tuple(variantCaseArb(v), fc.integer({ min: 1, max: 4 }));
      checks.push({
        kind: "property", id: `C1/recompute/${vkey(v)}/${kind}`, class: "C1", subject: { rule: v.decl.key, frozen: v.frozen, dtype: "f64+f32" },
        spec: `docs/spec/chunk-forms.md#recompute; docs/spec/tape.md#recompute; ${v.decl.sheet}`,
        tolerance: { kind: "bitwise", compared: "y and every gradient vs store-all", dtypes: ["f64", "f32"], rtol: 0, atol: 0 },
        runs: RUNS, arb,
        run: ([spec, every]: [RuleCaseSpec, number]) =>
          recomputeCase(v, spec, kind === "recompute" ? { kind } : { kind, every }),
      });
    }
  }
  return checks;
}
