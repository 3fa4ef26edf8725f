/**
 * A rule variant under test: a rule of the registry, active or as its frozen read (D3), with the
 * ways the rule checks evaluate it: untraced forward, hand-written backward called directly, and
 * the variant recorded on the tape as one opaque block. The state is differentiated too: the
 * initial state (active) or the state read (frozen), with a random upstream gradient on the active
 * variant's final state (docs/spec/state-gradients.md#checks).
 */
import { frobeniusDot, add } from "../src/ops/index.ts";
import { RULES } from "../src/rules/index.ts";
import {
  frozenBackwardWithState, frozenForward, frozenForwardSaved, paramNames, ruleBackwardWithState, ruleForward, ruleForwardSaved, usedParams,
  variantKey,
} from "../src/rules/level.ts";
import { frozenStateNames, initialStateName, stateNames } from "../src/rules/state-grad.ts";
import type { RuleDecl } from "../src/rules/types.ts";
import { STORE_ALL, type SavePolicy } from "../src/recompute.ts";
import { withTape } from "../src/tape.ts";
import type { Tensor } from "../src/tensor.ts";
import { ruleCaseSpecArb, type RuleCase } from "./rule-case.ts";

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

/** The state entries the variant differentiates: all of the rule's state, or what the frozen read reads. */
export function gradStateNames(v: Variant): string[] {
  return v.frozen ? frozenStateNames(v.decl) : stateNames(v.decl);
}

/**
 * Tensors that receive gradient in this variant: X and the used parameters (the frozen read: X
 * and W_Q, D3), then the state as `state0.<name>`.
 */
export function gradNames(v: Variant): string[] {
  const params = v.frozen ? ["X", "W_Q"] : ["X", ...usedParams(v.decl)];
  return [...params, ...gradStateNames(v).map(initialStateName)];
}

const STATE_PREFIX = initialStateName("");

/** Whether a gradNames entry is a state entry (`state0.<name>`). */
export function isStateGradName(name: string): boolean {
  return name.startsWith(STATE_PREFIX);
}

export function tensorOf(c: RuleCase, name: string): Tensor {
  if (name === "X") return c.X;
  if (name.startsWith(STATE_PREFIX)) return c.state[name.slice(STATE_PREFIX.length)]!;
  return c.params[name]!;
}

export function forwardY(v: Variant, c: RuleCase): Tensor {
  return v.frozen ? frozenForward(v.decl, c.X, c.params, c.state, c.cfg) : ruleForward(v.decl, c.X, c.params, c.state, c.cfg).y;
}

/** Hand-written backward of the variant, called directly (no tape), keyed like gradNames. */
export function handGrads(v: Variant, c: RuleCase): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  let dState: Record<string, Tensor>;
  if (v.frozen) {
    const r = frozenForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
    const g = frozenBackwardWithState(v.decl, r.saved, c.dy, c.cfg);
    Object.assign(out, { X: g.X, W_Q: g.W_Q });
    dState = g.dState;
  } else {
    const r = ruleForwardSaved(v.decl, c.X, c.params, c.state, c.cfg);
    const g = ruleBackwardWithState(v.decl, r.saved, c.dy, c.cfg, v.decl.inner, c.dFinal);
    Object.assign(out, g.grads);
    dState = g.dState0;
  }
  for (const [n, t] of Object.entries(dState)) out[initialStateName(n)] = t;
  return out;
}

export interface TapeRun {
  y: Tensor;
  grads: Record<string, Tensor | null>;
  /** Bytes the tape held after the forward (docs/spec/tape.md#must-hold accounting). */
  bytes: number;
}

/**
 * The variant recorded as one opaque block, its state on the tape, and back-propagated from
 * sum(y ⊙ dy) + Σ sum(final ⊙ dFinal) (FrobeniusDot passes dy and dFinal through exactly: 1·dy).
 * `mutate` runs between record and backward; `policy` is the tape's save policy
 * (docs/spec/tape.md#recompute). With `withState` false the state stays off the tape and the loss
 * is sum(y ⊙ dy) alone: the block a recompute plan covers (a block with its state on the tape is
 * kept store-all, docs/spec/chunk-forms.md#recompute).
 */
export function tapeGrads(v: Variant, c: RuleCase, mutate?: () => void, policy: SavePolicy = STORE_ALL, withState = true): TapeRun {
  return withTape((tape) => {
    const X = tape.input(c.X);
    const params: Record<string, Tensor> = {};
    for (const n of paramNames(v.decl)) params[n] = tape.param(c.params[n]!);
    const state: Record<string, Tensor> = { ...c.state };
    if (withState) for (const n of gradStateNames(v)) state[n] = tape.input(c.state[n]!);
    const r = v.frozen ? { y: frozenForward(v.decl, X, params, state, c.cfg), finalState: {} } : ruleForward(v.decl, X, params, state, c.cfg);
    if (tape.length !== 1) throw new Error(`expected ONE opaque block on the tape, found ${tape.length} entries`);
    const bytes = tape.bytes();
    mutate?.();
    const finals = withState ? Object.entries(c.dFinal ?? {}).filter(([n]) => n in r.finalState) : [];
    if (finals.length === 0) tape.backward(r.y, c.dy);
    else {
      let loss = frobeniusDot([r.y, c.dy], {});
      for (const [n, g] of finals) loss = add([loss, frobeniusDot([r.finalState[n]!, g], {})], {});
      tape.backward(loss);
    }
    const grads: Record<string, Tensor | null> = { X: tape.grad(X) };
    for (const n of paramNames(v.decl)) grads[n] = tape.grad(params[n]!);
    if (withState) for (const n of gradStateNames(v)) grads[initialStateName(n)] = tape.grad(state[n]!);
    return { y: r.y, grads, bytes };
  }, policy);
}

/** The rule-level loss of C2, sum(y ⊙ dy) + Σ sum(final ⊙ dFinal), as a closure over the case's (perturbable) tensors. */
export function lossOf(v: Variant, c: RuleCase): () => number {
  return () => {
    let s = 0;
    if (v.frozen) {
      const y = frozenForward(v.decl, c.X, c.params, c.state, c.cfg);
      for (let i = 0; i < y.size; i++) s += y.data[i]! * c.dy.data[i]!;
      return s;
    }
    const r = ruleForward(v.decl, c.X, c.params, c.state, c.cfg);
    for (let i = 0; i < r.y.size; i++) s += r.y.data[i]! * c.dy.data[i]!;
    for (const [n, g] of Object.entries(c.dFinal ?? {})) {
      const f = r.finalState[n]!;
      for (let i = 0; i < f.size; i++) s += f.data[i]! * g.data[i]!;
    }
    return s;
  };
}

/** A variant's case generator; a frozen read of a zero state reads zero (C8), so frozen variants read random states. */
export function variantCaseArb(v: Variant) {
  return v.frozen ? ruleCaseSpecArb(v.decl).map((s) => ({ ...s, state: "random" as const })) : ruleCaseSpecArb(v.decl);
}
