/**
 * The long regime's inputs (docs/spec/conformance.md#long-inputs): a case marked `longInputs` (the
 * regime profile's `long` batch of a rule that declares RuleDecl.longInputs) has its inner inputs
 * shaped by the rule's declaration before anything else sees them; every other case is unchanged.
 * The kernel paths (C5's sequences, the py: backend's) take their inner inputs through here.
 */
import type { InnerInputs, RuleConfig, RuleDecl } from "../src/rules/types.ts";
import type { Tensor } from "../src/tensor.ts";
import type { RuleCaseSpec } from "./rule-case.ts";

export function longShaped<R extends Readonly<Record<string, Tensor | undefined>>>(decl: RuleDecl, spec: RuleCaseSpec, inputs: R, cfg: RuleConfig): R {
  if (spec.longInputs !== true) return inputs;
  if (decl.longInputs === undefined) throw new Error(`a long-inputs case of ${decl.key}, which declares no longInputs`);
  return { ...inputs, ...decl.longInputs.shape(inputs as unknown as InnerInputs, cfg) };
}
