/**
 * A rule variant under test: a rule of the registry, active or as its frozen read (D3), with the
 * ways the rule checks evaluate it: untraced forward, hand-written backward called directly, and
 * the variant recorded on the tape as one opaque block.
 */
import { RULES } from "../src/rules/index.ts";
import {
  frozenBackward, frozenForward, frozenForwardSaved, paramNames, ruleBackward, ruleForward, ruleForwardSaved, usedParams, variantKey,
} from "../src/rules/level.ts";
import type { RuleDecl } from "../src/rules/types.ts";
import { STORE_ALL, type SavePolicy } from "../src/recompute.ts";
import { withTape } from "../src/tape.ts";
import type { Tensor } from "../src/tensor.ts";
import type { RuleCase } from "./rule-case.ts";

export type Variant = { decl: RuleDecl; frozen: boolean };

export function variants(): Variant[] {
  const out: Variant[] = [];
  for (const decl of RULES) {
    out.push({ decl, frozen: false });
    if (decl.frozen !== null) out.push({ decl, frozen: true });
  }
  return out;
}

export function vkey(v: Variant): string {
  return variantKey(v.decl.key, v.frozen);
}

/** Tensors that receive gradient in this variant (the frozen read: only X and W_Q, D3). */
export function gradNames(v: Variant): string[] {
  return v.frozen ? ["X", "W_Q"] : ["X", ...usedParams(v.decl)];
}

export function tensorOf(c: RuleCase, name: string): Tensor {
  return name === "X" ? c.X : c.params[name]!;
}

export function forwardY(v: Variant, c: RuleCase): Tensor {
  return v.frozen ? frozenForward(v.decl, c.X, c.params, c.state, c.cfg) : ruleForward(v.decl, c.X, c.params, c.state, c.cfg).y;
}

/** Hand-written backward of the variant, called directly (no tape). */
export function handGrads(v: Variant, c: RuleCase): Record<string, Tensor> {
  if (v.frozen) {
    const r = frozenForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
    return frozenBackward(v.decl, r.saved, c.dy, c.cfg);
  }
  const r = ruleForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
  return ruleBackward(v.decl, r.saved, c.dy, c.cfg);
}

export interface TapeRun {
  y: Tensor;
  grads: Record<string, Tensor | null>;
  /** Bytes the tape held after the forward (docs/spec/tape.md#must-hold accounting). */
  bytes: number;
}

/**
 * The variant recorded as one opaque block and back-propagated from dy. `mutate` runs between
 * record and backward; `policy` is the tape's save policy (docs/spec/tape.md#recompute).
 */
export function tapeGrads(v: Variant, c: RuleCase, mutate?: () => void, policy: SavePolicy = STORE_ALL): TapeRun {
  return withTape((tape) => {
    const X = tape.input(c.X);
    const params: Record<string, Tensor> = {};
    for (const n of paramNames(v.decl)) params[n] = tape.param(c.params[n]!);
    const y = v.frozen ? frozenForward(v.decl, X, params, c.state, c.cfg) : ruleForward(v.decl, X, params, c.state, c.cfg).y;
    if (tape.length !== 1) throw new Error(`expected ONE opaque block on the tape, found ${tape.length} entries`);
    const bytes = tape.bytes();
    mutate?.();
    tape.backward(y, c.dy);
    const grads: Record<string, Tensor | null> = { X: tape.grad(X) };
    for (const n of paramNames(v.decl)) grads[n] = tape.grad(params[n]!);
    return { y, grads, bytes };
  }, policy);
}

/** The rule-level loss of C2, sum(y ⊙ dy), as a closure over the case's (perturbable) tensors. */
export function lossOf(v: Variant, c: RuleCase): () => number {
  return () => {
    const y = forwardY(v, c);
    let s = 0;
    for (let i = 0; i < y.size; i++) s += y.data[i]! * c.dy.data[i]!;
    return s;
  };
}
