/**
 * The MAG model with CMS memory levels, forward (docs/spec/titans-family.md#mag-forward, docs/spec/titans-family.md#cms-combine; docs/spec/decisions.md#d11, docs/spec/decisions.md#d12):
 *   X = W_embed[ids] ;  A = SWA(X W_qᵀ, X W_kᵀ, X W_vᵀ)
 *   y_l = rule_l(X) when level l is active, its frozen read of the context when not
 *   y_c = Σ_l y_l  (× 1/sqrt(k) when k > 2) ;  O = A ⊙ sigmoid(y_c)
 *   logits = (O W_oᵀ) W_unembed ;  loss = cross entropy (D12)
 * ONE code path: built from tape ops and the rules' opaque blocks, so it records when a tape is
 * active (and the parameters are on it) and computes the same bits when not.
 */
import { crossEntropy, embedLookup, matmul, matmulTransposeB, mul, sigmoid } from "../ops/index.ts";
import { ruleForward } from "../rules/level.ts";
import type { Tensor } from "../tensor.ts";
import type { Model } from "./config.ts";
import type { LevelContext } from "./context.ts";
import { freqGate, type GateForward } from "./freq-gate.ts";
import { callLevels, levelSum } from "./levels.ts";
import { validateParams, type ModelParams } from "./params.ts";

export interface Batch {
  readonly ids: readonly number[];
  /** D12: ids in [0, V), or -1 for padding. */
  readonly targets: readonly number[];
}

/** The output of every pattern's forward. */
export interface MagOutput {
  /** Scalar, shape []. */
  readonly loss: Tensor;
  /** y_l per level, before the sum (unscaled): MAC's write-stage outputs r_l, MAL's m_l. */
  readonly levelOutputs: readonly Tensor[];
  /** MAC only: the read stage's h_l per level (docs/spec/composition.md#mac-forward). */
  readonly readOutputs?: readonly Tensor[];
  /** Which levels ran their rule (the rest read frozen). */
  readonly active: readonly boolean[];
  /** g_l per level under the learned gate, else null. */
  readonly gates: readonly number[] | null;
  /** The context after this call: active levels' final memories, frozen levels' unchanged. */
  readonly context: readonly LevelContext[];
}

/** The checks every pattern makes before its forward; returns the run's dtype. */
export function checkCall(model: Model, params: ModelParams, batch: Batch, context: readonly LevelContext[]): Tensor["dtype"] {
  const dtype = params.model.W_embed.dtype;
  validateParams(model, params, dtype);
  const { seq_len: s } = model.spec;
  if (batch.ids.length !== s) throw new Error(`input ids: length ${batch.ids.length}, expected seq_len = ${s}`);
  if (context.length !== model.k) throw new Error(`context has ${context.length} levels, k = ${model.k}`);
  return dtype;
}

/** The learned gate on X when the schedule is learned, else null; and the levels' decisions. */
export function decide(model: Model, params: ModelParams, X: Tensor, pulse: readonly boolean[]): { gate: GateForward | null; active: readonly boolean[] } {
  const freq = model.spec.freq;
  const gate = freq.kind === "learned" ? freqGate(X, params.levels, freq.threshold) : null;
  const active = gate?.active ?? pulse;
  if (active.length !== model.k) throw new Error(`pulse has ${active.length} entries, k = ${model.k}`);
  return { gate, active };
}

/**
 * `pulse` decides which levels are active under the fixed schedule; the learned gate replaces it
 * (§9.7), and then `pulse` is ignored.
 */
export function magForward(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]): MagOutput {
  checkCall(model, params, batch, context);
  const P = params.model;

  const X = embedLookup([P.W_embed], { indices: batch.ids });
  const A = ruleForward(model.swa.decl, X, { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg).y;

  const { gate, active } = decide(model, params, X, pulse);
  const { ys, next } = callLevels(model, params, X, active, context);
  const combined = levelSum(model, ys, gate);

  const O = mul([A, sigmoid([combined], {})], {});
  const logits = matmul([matmulTransposeB([O, P.W_o], {}), P.W_unembed], {});
  const loss = crossEntropy([logits], { targets: batch.targets });
  return { loss, levelOutputs: ys, active: [...active], gates: gate?.values ?? null, context: next };
}

export type ModelOutput = MagOutput;
