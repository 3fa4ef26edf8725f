/**
 * Kernel-level cases: the inputs of a rule's inner pair (k, v, q, x, gates, omega — or q alone for
 * a frozen read), its state and dy, taken from a generated rule case by running the level's
 * projections and gates in f64. Kernels, the plain-precision reference and ref64 all start here.
 */
import * as fc from "fast-check";
import { frozenForwardSaved, ruleForwardSaved } from "../src/rules/level.ts";
import { INNER_INPUT_NAMES, type InnerInputs, type RuleDecl } from "../src/rules/types.ts";
import type { Tensor } from "../src/tensor.ts";
import type { PairCase } from "../oracle/kernel-case.ts";
import { buildRuleCase, ruleCaseSpecArb, type RuleCaseSpec, type SizeLimits } from "./rule-case.ts";
import { longShaped } from "./long-inputs.ts";


export interface InnerCase extends PairCase {
  readonly cfg: ReturnType<typeof buildRuleCase>["cfg"];
}

export function innerCase(decl: RuleDecl, spec: RuleCaseSpec, frozen: boolean): InnerCase {
  const c = buildRuleCase(decl, spec, "f64", frozen);
  const raw: Record<string, Tensor> = {};
  if (frozen) {
    raw.q = frozenForwardSaved(decl, c.X, c.params, c.state, c.cfg).saved.q!;
  } else {
    const saved = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg).saved;
    for (const n of INNER_INPUT_NAMES) {
      const t = n === "x" ? saved.X : saved[n];
      if (t !== undefined) raw[n] = t;
    }
  }
  const inputs = frozen ? raw : longShaped(decl, spec, raw, c.cfg);
  return { cfg: c.cfg, inputs: inputs as unknown as InnerInputs, state: c.state, dy: c.dy, ...(frozen || c.dFinal === undefined ? {} : { dFinal: c.dFinal }) };
}

/** n values of any arbitrary, deterministic in the seed (for measurements and tests outside a property run). */
export function sampleOf<T>(arb: fc.Arbitrary<T>, seed: number, n: number): T[] {
  return fc.sample(arb, { seed, numRuns: n });
}

/** n generated case specs of a rule, deterministic in the seed (for measurements outside a property run). */
export function sampleRuleCaseSpecs(decl: RuleDecl, sizes: SizeLimits, seed: number, n: number): RuleCaseSpec[] {
  return fc.sample(ruleCaseSpecArb(decl, sizes), { seed, numRuns: n });
}
