/**
 * A whole rule at level scope, written once for every rule: the level machinery around the rule's
 * inner pair (level-projection.ts; parameters in level-params.ts), its forward and hand-written
 * backward, the frozen read, and the tape blocks (docs/spec/titans-family.md#projections,
 * docs/spec/miras-compression.md#backward-tail). A rule forward records ONE opaque block when traced.
 */
import * as K from "../numeric.ts";
import { activeTape, registerOpaque, type Tape } from "../tape.ts";
import type { RecomputeDecl } from "../recompute.ts";
import { packCheckpoints, ruleRecomputeDecl, runStretches, stretchStarts } from "./rule-recompute.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { finalStateName, frozenStateNames, initialStateName, stateBlockKey, stateNames } from "./state-grad.ts";
import type { InnerInputs, InnerPair, Named, RuleConfig, RuleDecl, State } from "./types.ts";
import { paramNames, validateInputs, type Params } from "./level-params.ts";
import { levelBackward, levelForward, levelSavedNames, project } from "./level-projection.ts";

export {
  ATTENTION_PARAMS, MEMORY_PARAMS, paramNames, paramShapes, usedParams, validateInputs, withDefaults, type Params,
} from "./level-params.ts";
export { levelSavedNames } from "./level-projection.ts";

// ── the rule as one opaque block ────────────────────────────────────────────

interface RuleAttrs {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
  readonly inner: InnerPair<string>;
}

export interface RuleResult {
  readonly y: Tensor;
  readonly finalState: State;
}

/** Forward of the whole rule. `inner` defaults to the reference pair; a kernel backend may supply its own. */
export function ruleForwardSaved(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): RuleResult & { saved: Record<string, Tensor> } {
  validateInputs(decl, X, params, state, cfg);
  const lv = levelForward(decl, X, params);
  const r = inner.forward(lv.inputs, state, cfg);
  const saved: Record<string, Tensor> = { ...lv.saved };
  for (const [n, t] of Object.entries(r.saved)) {
    if (n in saved) throw new Error(`rule '${decl.key}': inner saved name '${n}' collides with a level name`);
    saved[n] = t;
  }
  return { y: r.y, finalState: r.finalState, saved };
}

/** Hand-written backward of the whole rule (BPTT through the sequence): dX and every parameter. */
export function ruleBackward(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): Record<string, Tensor> {
  return ruleBackwardWithState(decl, saved, dy, cfg, inner).grads;
}

/**
 * ruleBackward that also takes ∂L/∂(final state) and returns ∂L/∂(initial state) as the inner
 * pair gives it (docs/spec/state-gradients.md#active); `dState0` is empty when the pair gives none.
 */
export function ruleBackwardWithState(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner, dFinal?: State): { grads: Record<string, Tensor>; dState0: Record<string, Tensor> } {
  const innerSaved: Record<string, Tensor> = {};
  for (const n of inner.saved) innerSaved[n] = saved[n]!;
  const g = inner.backward(innerSaved, innerInputsOf(decl, saved), dy, cfg, dFinal);
  return { grads: levelBackward(decl, saved, g), dState0: g.dState0 ?? {} };
}

/** The inner pair's inputs, recovered from the level's saved tensors. */
function innerInputsOf(decl: RuleDecl, saved: Named<string>): InnerInputs {
  const inp: { -readonly [P in keyof InnerInputs]: InnerInputs[P] } = { k: saved.k!, v: saved.v!, q: saved.q!, x: saved.X! };
  for (const n of decl.auxInputs ?? []) inp[n] = saved[n]!;
  for (const g of decl.gates) inp[g] = saved[g]!;
  if (decl.omega) inp.omega = saved.omega!;
  return inp;
}

/**
 * Rule forward: untraced it just computes; with an active tape it records one opaque block. The
 * block carries the state (initial state in, final state out) only when the caller put the
 * state on the tape (docs/spec/state-gradients.md#tape): a model's carried context stays untracked.
 */
export function ruleForward(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): RuleResult {
  const tape = activeTape();
  if (tape !== null && inner === decl.inner && tape.recomputes(decl.key)) {
    const inputs: Record<string, Tensor> = { X, ...pick(params, paramNames(decl)) };
    if (tape.anyTracked(Object.values(inputs))) return recordRecomputed(tape, decl, X, params, state, cfg, inputs);
  }
  const r = ruleForwardSaved(decl, X, params, state, cfg, inner);
  if (tape !== null) {
    const inputs: Record<string, Tensor> = { X, ...pick(params, paramNames(decl)) };
    const names = stateNames(decl);
    const withState = tape.anyTracked(names.map((n) => state[n]!));
    if (withState || tape.anyTracked(Object.values(inputs))) {
      const attrs: RuleAttrs = { decl, cfg, inner };
      const saved = pick(r.saved, savedNames(decl, inner));
      if (!withState) tape.recordOpaque(decl.key, inputs, { y: r.y }, saved, attrs);
      else {
        const outputs: Record<string, Tensor> = { y: r.y };
        for (const n of names) {
          inputs[initialStateName(n)] = state[n]!;
          outputs[finalStateName(n)] = r.finalState[n]!;
        }
        tape.recordOpaque(stateBlockKey(decl.key), inputs, outputs, saved, attrs);
      }
    }
  }
  return { y: r.y, finalState: r.finalState };
}

/**
 * The forward under a recompute policy (docs/spec/chunk-forms.md#recompute): the inner pair runs
 * stretch by stretch and the tape keeps X, the parameters and the state at each stretch start.
 */
function recordRecomputed(tape: Tape, decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig,
  inputs: Record<string, Tensor>): RuleResult {
  validateInputs(decl, X, params, state, cfg);
  const lv = levelForward(decl, X, params);
  const r = runStretches(decl.inner, lv.inputs, state, cfg, stretchStarts(decl, cfg.seq_len, tape.policy));
  const stored = { ...inputs, ...packCheckpoints(decl, r.checkpoints) };
  tape.recordOpaque(decl.key, inputs, { y: r.y }, stored, { decl, cfg, inner: decl.inner } satisfies RuleAttrs);
  return { y: r.y, finalState: r.finalState };
}

function pick(rec: Readonly<Record<string, Tensor>>, names: readonly string[]): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const n of names) out[n] = rec[n]!;
  return out;
}

export function savedNames(decl: RuleDecl, inner: InnerPair<string> = decl.inner): string[] {
  return [...levelSavedNames(decl), ...inner.saved];
}

// ── frozen reads ────────────────────────────────────────────────────────────

/** A rule variant's key: `<rule>` for the active rule, `<rule>.frozen` for its frozen read. */
export function variantKey(key: string, frozen: boolean): string {
  return frozen ? `${key}.frozen` : key;
}

/** The inverse of variantKey. */
export function parseVariantKey(variant: string): { key: string; frozen: boolean } {
  const frozen = variant.endsWith(".frozen");
  return { key: frozen ? variant.slice(0, -".frozen".length) : variant, frozen };
}

export function frozenKey(decl: RuleDecl): string {
  return variantKey(decl.key, true);
}

/** Frozen read: q = X W_Q^T (no normalisation, D1), y = the rule's own read of the state. */
export function frozenForwardSaved(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig):
  { y: Tensor; saved: Record<string, Tensor> } {
  const fz = decl.frozen;
  if (fz === null) throw new Error(`rule '${decl.key}' has no frozen variant`);
  validateInputs(decl, X, params, state, cfg);
  const q = project(X, params.W_Q!);
  const r = fz.forward(q, state, cfg);
  return { y: r.y, saved: { X, W_Q: params.W_Q!, q, ...r.saved } };
}

/** Frozen VJP: of the parameters only X and W_Q receive gradient (D3). */
export function frozenBackward(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig): { X: Tensor; W_Q: Tensor } {
  const { X, W_Q } = frozenBackwardWithState(decl, saved, dy, cfg);
  return { X, W_Q };
}

/** frozenBackward plus ∂L/∂(the state read) (docs/spec/state-gradients.md#frozen). */
export function frozenBackwardWithState(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig):
  { X: Tensor; W_Q: Tensor; dState: Record<string, Tensor> } {
  const fz = decl.frozen!;
  const inner: Record<string, Tensor> = {};
  for (const n of fz.saved) inner[n] = saved[n]!;
  const { dq, dState } = fz.backward(inner, saved.q!, dy, cfg);
  const X = saved.X!, W = saved.W_Q!;
  const [s, d] = X.shape as [number, number];
  return {
    X: new Tensor(X.dtype, [s, d], K.matmul(dq.data, W.data, s, d, d, alloc(X.dtype, s * d))),
    W_Q: new Tensor(X.dtype, [d, d], K.matmulTA(dq.data, X.data, d, s, d, alloc(X.dtype, d * d))),
    dState,
  };
}

export function frozenForward(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig): Tensor {
  const r = frozenForwardSaved(decl, X, params, state, cfg);
  const tape = activeTape();
  if (tape === null) return r.y;
  const names = frozenStateNames(decl);
  const withState = tape.anyTracked(names.map((n) => state[n]!));
  if (withState) {
    const inputs: Record<string, Tensor> = { X, W_Q: params.W_Q! };
    for (const n of names) inputs[initialStateName(n)] = state[n]!;
    tape.recordOpaque(stateBlockKey(frozenKey(decl)), inputs, { y: r.y }, r.saved, { decl, cfg });
  } else if (tape.anyTracked([X, params.W_Q!])) {
    // A frozen read has no recurrence: under any recompute policy it keeps X, W_Q and the state.
    const kept = (decl.frozen!.saved as readonly string[]).filter((n) => stateNames(decl).includes(n));
    const saved = tape.recomputes(frozenKey(decl)) ? { X, W_Q: params.W_Q!, ...pick(r.saved, kept) } : r.saved;
    tape.recordOpaque(frozenKey(decl), { X, W_Q: params.W_Q! }, { y: r.y }, saved, { decl, cfg });
  }
  return r.y;
}

/**
 * The frozen block's recompute declaration: q and the read's own saved tensors from X, W_Q and the
 * state entries the read keeps anyway (its saved tensors named like state entries).
 */
function frozenRecomputeDecl(decl: RuleDecl): RecomputeDecl {
  const fz = decl.frozen!;
  const kept = fz.saved.filter((n) => stateNames(decl).includes(n));
  const made = fz.saved.filter((n) => !kept.includes(n));
  return {
    stored: ["X", "W_Q", ...kept],
    producers: [{
      name: "frozen-read", from: ["X", "W_Q", ...kept], makes: ["q", ...made],
      run: (t, attrs) => {
        const { cfg } = attrs as { cfg: RuleConfig };
        const q = project(t.X!, t.W_Q!);
        const state: Record<string, Tensor> = {};
        for (const n of kept) state[n] = t[n]!;
        const saved = fz.forward(q, state, cfg).saved;
        return { q, ...pick(saved, made) };
      },
    }],
  };
}

/** Registers the rule's opaque blocks (active and frozen) with the tape. */
export function registerRuleBlocks(decl: RuleDecl): void {
  registerOpaque({
    key: decl.key,
    inputs: ["X", ...paramNames(decl)],
    outputs: ["y"],
    saved: savedNames(decl),
    recompute: ruleRecomputeDecl(decl, {
      paramNames: paramNames(decl),
      levelSaved: levelSavedNames(decl),
      levelForward: (X, params) => levelForward(decl, X, params),
      innerInputsOf: (saved) => innerInputsOf(decl, saved),
    }),
    backward: (saved, dOut, attrs) => {
      const a = attrs as RuleAttrs;
      return ruleBackward(a.decl, saved, dOut.y!, a.cfg, a.inner);
    },
  });
  const fz = decl.frozen;
  if (fz !== null) {
    registerOpaque({
      key: frozenKey(decl),
      inputs: ["X", "W_Q"],
      outputs: ["y"],
      saved: ["X", "W_Q", "q", ...fz.saved],
      recompute: frozenRecomputeDecl(decl),
      backward: (saved, dOut, attrs) => {
        const a = attrs as { decl: RuleDecl; cfg: RuleConfig };
        return frozenBackward(a.decl, saved, dOut.y!, a.cfg);
      },
    });
  }
  const names = stateNames(decl);
  if (names.length === 0) return;
  // The same blocks with the state as an input (and the final state as an output): recorded when
  // the caller put the state on the tape.
  registerOpaque({
    key: stateBlockKey(decl.key),
    inputs: ["X", ...paramNames(decl), ...names.map(initialStateName)],
    outputs: ["y", ...names.map(finalStateName)],
    saved: savedNames(decl),
    backward: (saved, dOut, attrs) => {
      const a = attrs as RuleAttrs;
      const dFinal: Record<string, Tensor> = {};
      for (const n of names) dFinal[n] = dOut[finalStateName(n)]!;
      const r = ruleBackwardWithState(a.decl, saved, dOut.y!, a.cfg, a.inner, dFinal);
      const out: Record<string, Tensor> = { ...r.grads };
      for (const [n, g] of Object.entries(r.dState0)) out[initialStateName(n)] = g;
      return out;
    },
  });
  if (fz !== null) {
    const read = frozenStateNames(decl);
    registerOpaque({
      key: stateBlockKey(frozenKey(decl)),
      inputs: ["X", "W_Q", ...read.map(initialStateName)],
      outputs: ["y"],
      saved: ["X", "W_Q", "q", ...fz.saved],
      backward: (saved, dOut, attrs) => {
        const a = attrs as { decl: RuleDecl; cfg: RuleConfig };
        const r = frozenBackwardWithState(a.decl, saved, dOut.y!, a.cfg);
        const out: Record<string, Tensor> = { X: r.X, W_Q: r.W_Q };
        for (const [n, g] of Object.entries(r.dState)) out[initialStateName(n)] = g;
        return out;
      },
    });
  }
}

export type { DType };
