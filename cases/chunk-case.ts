/**
 * Inputs for the chunk-form checks (docs/spec/chunk-forms.md): the inner pair's per-token inputs
 * (k, v, q, gates, omega) and a state, drawn directly at the gate regimes of the rule checks.
 * Rows of k and q are unit vectors when the rule normalises them (D1), else of norm in [0.5, 1].
 */
import type * as fc from "fast-check";
import type { InnerInputs, RuleConfig, RuleDecl } from "../src/rules/types.ts";
import { withDefaults } from "../src/rules/level.ts";
import { Rng, uniformTensor } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";
import { ALPHA_LEVELS, THETA_LEVELS, ruleCaseSpecArb, type RuleCaseSpec, type SizeLimits } from "./rule-case.ts";

/** The rule checks' case spec: sizes, hyperparameters, gate regimes, state kind, seed. */
export type ChunkCaseSpec = RuleCaseSpec;

export interface ChunkCase {
  readonly cfg: RuleConfig;
  readonly inp: InnerInputs;
  readonly state: Record<string, Tensor>;
  /** Upstream gradients of y and of each final state entry (the loss of C2). */
  readonly dy: Tensor;
  readonly dState: Record<string, Tensor>;
}

/** Specs over the rule's declared hyperparameter domains (as the rule checks draw them). */
export function chunkCaseArb(decl: RuleDecl, sizes: SizeLimits): fc.Arbitrary<ChunkCaseSpec> {
  return ruleCaseSpecArb(decl, sizes);
}

function rowsOfNorm(s: number, d: number, rng: Rng, unit: boolean): Tensor {
  const t = new Tensor("f64", [s, d]);
  for (let i = 0; i < s; i++) {
    const row = Array.from({ length: d }, () => rng.uniform(-1, 1));
    const n = Math.hypot(...row) || 1;
    const r = unit ? 1 : rng.uniform(0.5, 1);
    for (let j = 0; j < d; j++) t.data[i * d + j] = (r * row[j]!) / n;
  }
  return t;
}

/** Gate values spread ±20% (relative) around the regime's level, so tokens differ. */
function gate(s: number, level: number, rng: Rng): Tensor {
  const t = new Tensor("f64", [s]);
  for (let i = 0; i < s; i++) t.data[i] = Math.min(0.999, level * rng.uniform(0.8, 1.2));
  return t;
}

export function buildChunkCase(decl: RuleDecl, spec: ChunkCaseSpec): ChunkCase {
  const { d, seq_len: s } = spec;
  const rng = new Rng(spec.seed);
  const k = rowsOfNorm(s, d, rng, decl.normalizeKQ), q = rowsOfNorm(s, d, rng, decl.normalizeKQ);
  const v = uniformTensor("f64", [s, d], rng, -1, 1);
  // x gets its own copy of v, so a check that perturbs v (finite differences) leaves x alone
  const inp: Record<string, Tensor> = { k, v, q, x: new Tensor("f64", [s, d], v.data.slice()) };
  if (decl.gates.includes("alpha")) inp.alpha = gate(s, ALPHA_LEVELS[spec.alpha], rng);
  if (decl.gates.includes("theta")) inp.theta = gate(s, THETA_LEVELS[spec.theta], rng);
  if (decl.gates.includes("eta")) inp.eta = gate(s, 0.6, rng);
  if (decl.omega) inp.omega = uniformTensor("f64", [s, d], rng, -1, 1);
  const cfg = withDefaults(decl, { d, seq_len: s, ...spec.hyper });
  const state = spec.state === "init" ? decl.init(cfg, "f64") : decl.randomState(cfg, "f64", () => rng.next());
  const dy = uniformTensor("f64", [s, d], rng, -1, 1);
  const dState: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(state)) dState[n] = uniformTensor("f64", t.shape, rng, -1, 1);
  return { cfg, inp: inp as unknown as InnerInputs, state, dy, dState };
}
