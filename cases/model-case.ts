/**
 * Model cases for the checks and the golden fixtures: a small serialisable spec (sizes, level
 * rules and hyperparameters, context kind, seed) from which every tensor is drawn
 * deterministically. Scales keep gradients well above rounding noise: embeddings U(−1, 1),
 * gate biases at mid-range values (alpha 0.5, theta 0.3, eta 0.6), not the sheet's defaults
 * (b_alpha 3, b_theta −4.6), under which many gradients are tiny.
 */
import { Rng, uniformTensor } from "../src/rng.ts";
import { Tensor, type DType } from "../src/tensor.ts";
import {
  DEFAULT_CHUNK_SIZES, MODEL_PARAMS, PERSIST_PARAM, compileModel, levelParamShapes, modelParamShapes, modelRecordShapes,
  type Composition, type FreqSchedule, type LevelSpec, type Model, type ModelParamName,
} from "../src/model/config.ts";
import { initContext, keepContext, type LevelContext } from "../src/model/context.ts";
import { modelForward } from "../src/model/forward.ts";
import type { Batch } from "../src/model/mag.ts";
import type { ModelParams } from "../src/model/params.ts";
import type { MemoryRuleKey } from "../src/rules/index.ts";

export type ContextKind = "init" | "random" | "warm";

export interface ModelCaseSpec {
  readonly d: number;
  readonly seq_len: number;
  readonly vocab: number;
  readonly heads: number;
  readonly window: number;
  readonly levels: readonly LevelSpec[];
  /** Absent: the D11 defaults for k. */
  readonly chunk_sizes?: readonly number[];
  readonly freq: FreqSchedule;
  /** "init": D4; "random": each rule's random valid state; "warm": after one all-active step from init. */
  readonly context: ContextKind;
  /** Mark one target as padding (-1, D12). */
  readonly pad: boolean;
  readonly seed: number;
  /** Absent: "mag" (docs/spec/composition.md); a MAC case has the default number of persistent tokens. */
  readonly pattern?: Composition;
  /**
   * Factors on the half-width of named model matrices (absent: 1). The generated MAC cases of the
   * gradient checks set MAC_INPUT_SCALE; the training loops of C7 keep the plain draws.
   */
  readonly scales?: Readonly<Partial<Record<ModelParamName, number>>>;
}

export interface ModelCase {
  readonly model: Model;
  readonly params: ModelParams;
  readonly batch: Batch;
  readonly context: LevelContext[];
}

/**
 * MAC's inputs drawn larger (a factor on the half-width of each named model matrix): MAC's levels
 * write with the attention output Y, and the learned rate θ reaches the loss only through the
 * write's read r = rule(Y) and the output gate Y ⊙ sigmoid(r), several powers of |Y|. At the MAG
 * scales the MLP memories' w_theta gradients were below the 1e-10 vacuity floor in 117 (Moneta),
 * 281 (MEMORA) and 56 (YAAD) of 600 k = 4 cases; with W_v and W_embed twice as wide in 5, 10 and 4
 * of 600, and no gradient was non-finite. Four times as wide W_v lifts them further but made one
 * Moneta memory of 600 diverge (p > 2: W1 ~ 1e153, NaN gradients). Generated cases only (specArb):
 * 50 SGD steps of C7's smoke loop diverge from them (MAC Hebbian); docs/spec/tolerances.md#mac-inputs
 */
export const MAC_INPUT_SCALE: Readonly<Partial<Record<ModelParamName, number>>> = { W_v: 2, W_embed: 2 };

const GATE_BIAS: Readonly<Record<string, number>> = {
  b_alpha: 0, // sigmoid(0) = 0.5
  b_theta: Math.log(Math.expm1(0.3)), // softplus⁻¹(0.3)
  b_eta: Math.log(0.6 / 0.4), // sigmoid⁻¹(0.6)
};


/** Hyperparameters bounded by the model's sizes (Trellis' d_compress <= d). */
export function fitHyper(hyper: Readonly<Record<string, number | string>>, d: number): Record<string, number | string> {
  const out = { ...hyper };
  if ("d_compress" in out) out.d_compress = Math.min(Number(out.d_compress), d);
  return out;
}

export function chunkSizesFor(k: number): readonly number[] {
  const c = DEFAULT_CHUNK_SIZES[k];
  if (c === undefined) throw new Error(`no default chunk sizes for k = ${k} (D11 defines k = 1, 2, 4)`);
  return c;
}

export function buildModelCase(spec: ModelCaseSpec, dtype: DType = "f64"): ModelCase {
  const model = compileModel({
    d: spec.d, seq_len: spec.seq_len, vocab: spec.vocab, heads: spec.heads, window: spec.window,
    chunk_sizes: spec.chunk_sizes ?? chunkSizesFor(spec.levels.length),
    levels: spec.levels.map((lv) => ({ rule: lv.rule, hyper: fitHyper(lv.hyper, spec.d) })),
    freq: spec.freq,
    ...(spec.pattern === undefined ? {} : { pattern: spec.pattern }),
  });
  const rng = new Rng(spec.seed);
  const { d, vocab: V, seq_len: s } = spec;
  const shapes = modelParamShapes(spec);
  const mp = {} as Record<ModelParamName, Tensor>;
  for (const n of MODEL_PARAMS) {
    const scale = (n === "W_embed" ? 1 : 1.5 / Math.sqrt(d)) * (spec.scales?.[n] ?? 1);
    mp[n] = uniformTensor(dtype, shapes[n], rng, -scale, scale);
  }
  // Drawn after the shared six, so a MAG case's tensors do not depend on the field existing.
  if (model.pattern === "mac") {
    (mp as Record<string, Tensor>)[PERSIST_PARAM] = uniformTensor(dtype, modelRecordShapes(model)[PERSIST_PARAM]!, rng, -1, 1);
  }
  const levels = model.levels.map((_, l) => {
    const rec: Record<string, Tensor> = {};
    for (const [n, shape] of Object.entries(levelParamShapes(model, l))) {
      const fanIn = shape[shape.length - 1]!;
      if (n in GATE_BIAS) rec[n] = biasTensor(dtype, shape, GATE_BIAS[n]!);
      else if (n === "b_freq") rec[n] = uniformTensor(dtype, [1], rng, -1, 1);
      else if (n.startsWith("W_")) rec[n] = uniformTensor(dtype, shape, rng, -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn));
      else rec[n] = uniformTensor(dtype, shape, rng, -0.5 / Math.sqrt(fanIn), 0.5 / Math.sqrt(fanIn));
    }
    return rec;
  });
  const params: ModelParams = { model: mp, levels };
  // Neighbouring ids differ: a window of identical tokens has identical keys and values, and
  // attention then passes no gradient to W_q, W_k.
  const ids: number[] = [];
  for (let t = 0; t < s; t++) ids.push(t === 0 || V < 2 ? rng.int(0, V - 1) : (ids[t - 1]! + rng.int(1, V - 1)) % V);
  const targets = Array.from({ length: s }, () => rng.int(0, V - 1));
  // With two positions, padding one can leave only position 0, which attends to itself alone.
  if (spec.pad && s > 2) targets[rng.int(0, s - 1)] = -1;
  const batch: Batch = { ids, targets };
  return { model, params, batch, context: makeContext(spec.context, model, params, batch, dtype, rng) };
}

/** A gate bias: [1], or [d] for a channel gate, spread one logit either side of v across the channels (as in rule cases). */
function biasTensor(dtype: DType, shape: readonly number[], v: number): Tensor {
  const t = new Tensor(dtype, shape);
  const n = t.size;
  for (let j = 0; j < n; j++) t.data[j] = v + (n === 1 ? 0 : (2 * j) / (n - 1) - 1);
  return t;
}

function makeContext(kind: ContextKind, model: Model, params: ModelParams, batch: Batch, dtype: DType, rng: Rng): LevelContext[] {
  const init = initContext(model, dtype);
  if (kind === "init") return init;
  if (kind === "random") {
    return model.levels.map((lv) => keepContext(lv, lv.decl.randomState(lv.cfg, dtype, () => rng.next())));
  }
  return [...modelForward(model, params, batch, model.levels.map(() => true), init).context];
}

/** The fixture-sized model case (d = 4, seq_len = 4, V = 8): k levels of one rule from a random context. */
export function smallModelSpec(rule: MemoryRuleKey, k: number, seed: number, over: Partial<ModelCaseSpec> = {}): ModelCaseSpec {
  return {
    d: 4, seq_len: 4, vocab: 8, heads: 2, window: 3, pad: true, seed, freq: { kind: "fixed" }, context: "random",
    levels: Array.from({ length: k }, () => ({ rule, hyper: {} })), ...over,
  };
}
