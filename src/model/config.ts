/**
 * The MAG + CMS model's declaration (docs/spec/titans-family.md#mag, docs/spec/titans-family.md#cms, docs/spec/decisions.md#d10, docs/spec/decisions.md#d11): sizes, the
 * rule of each memory level, chunk sizes and the frequency schedule. `compileModel` resolves it
 * once into rule declarations and rule configurations, so the forward, the hand-written oracle,
 * the fixtures and the checks all read one resolved object.
 */
import { isMemoryRule, ruleByKey, type MemoryRuleKey } from "../rules/index.ts";
import { paramNames, paramShapes, withDefaults } from "../rules/level.ts";
import type { RuleConfig, RuleDecl } from "../rules/types.ts";

export { isMemoryRule, type MemoryRuleKey };

/** D11 default chunk sizes per k. */
export const DEFAULT_CHUNK_SIZES: Readonly<Record<number, readonly number[]>> = {
  1: [1], 2: [1, 8], 4: [1, 8, 64, 512],
};

/** The learned gate's threshold default (docs/spec/titans-family.md#learned-gate, docs/spec/fixtures.md#rule-state). */
export const DEFAULT_FREQ_THRESHOLD = 0.5;

export type FreqSchedule =
  | { readonly kind: "fixed" }
  | { readonly kind: "learned"; readonly threshold: number };

export interface LevelSpec {
  readonly rule: MemoryRuleKey;
  /** The rule's hyperparameters (canonical names); absent ones take the declared default. */
  readonly hyper: Readonly<Record<string, number | string>>;
}

export interface ModelSpec {
  readonly d: number;
  readonly seq_len: number;
  readonly vocab: number;
  readonly heads: number;
  readonly window: number;
  /** One per level; level 0 must have C = 1 only for the Conductor's "always active" reading. */
  readonly chunk_sizes: readonly number[];
  readonly levels: readonly LevelSpec[];
  readonly freq: FreqSchedule;
}

export interface Level {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
}

export interface Model {
  readonly spec: ModelSpec;
  readonly k: number;
  readonly swa: Level;
  readonly levels: readonly Level[];
  /** D11: the level sum is scaled by 1/sqrt(k) only when k > 2 (null: no scale op at all). */
  readonly combineScale: number | null;
}

export const MODEL_PARAMS = ["W_embed", "W_q", "W_k", "W_v", "W_o", "W_unembed"] as const;
export type ModelParamName = (typeof MODEL_PARAMS)[number];
export const FREQ_PARAMS = ["w_freq", "b_freq"] as const;

export function compileModel(spec: ModelSpec): Model {
  const k = spec.levels.length;
  const need = (ok: boolean, msg: string) => {
    if (!ok) throw new Error(`model: ${msg}`);
  };
  need(k >= 1, "needs at least one memory level");
  need(spec.chunk_sizes.length === k, `chunk_sizes has ${spec.chunk_sizes.length} entries, k = ${k}`);
  need(spec.chunk_sizes.every((c) => Number.isInteger(c) && c >= 1), `chunk sizes must be positive integers, got [${spec.chunk_sizes.join(", ")}]`);
  for (const [name, v] of [["d", spec.d], ["seq_len", spec.seq_len], ["vocab", spec.vocab]] as const) {
    need(Number.isInteger(v) && v >= 1, `${name} = ${v}, expected a positive integer`);
  }
  if (spec.freq.kind === "learned") {
    need(Number.isFinite(spec.freq.threshold), `freq_threshold = ${spec.freq.threshold}, expected a number`);
  }
  const base = { d: spec.d, seq_len: spec.seq_len };
  const swaDecl = ruleByKey("swa");
  const levels = spec.levels.map((lv, l) => {
    need(isMemoryRule(lv.rule), `level ${l}: '${lv.rule}' is not a memory rule`);
    const decl = ruleByKey(lv.rule);
    return { decl, cfg: withDefaults(decl, { ...base, ...lv.hyper }) };
  });
  return {
    spec,
    k,
    swa: { decl: swaDecl, cfg: withDefaults(swaDecl, { ...base, heads: spec.heads, window: spec.window }) },
    levels,
    combineScale: k > 2 ? 1 / Math.sqrt(k) : null,
  };
}

export function modelParamShapes(spec: Pick<ModelSpec, "d" | "vocab">): Record<ModelParamName, number[]> {
  const { d, vocab: V } = spec;
  return { W_embed: [V, d], W_q: [d, d], W_k: [d, d], W_v: [d, d], W_o: [d, d], W_unembed: [d, V] };
}

/** A level's canonical parameters: the rule's own, plus w_freq, b_freq under the learned gate. */
export function levelParamNames(model: Model, l: number): string[] {
  const names = paramNames(model.levels[l]!.decl);
  return model.spec.freq.kind === "learned" ? [...names, ...FREQ_PARAMS] : names;
}

export function levelParamShapes(model: Model, l: number): Record<string, number[]> {
  const lv = model.levels[l]!;
  const shapes = paramShapes(lv.decl, lv.cfg);
  if (model.spec.freq.kind === "learned") Object.assign(shapes, { w_freq: [model.spec.d], b_freq: [1] });
  return shapes;
}
