/**
 * The model's declaration (docs/spec/titans-family.md#mag, docs/spec/composition.md, docs/spec/titans-family.md#cms, docs/spec/decisions.md#d10, docs/spec/decisions.md#d11): sizes, the
 * composition pattern, the rule of each memory level, chunk sizes and the frequency schedule. `compileModel` resolves it
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

/** How memory and attention combine (docs/spec/composition.md); "mag" when a spec leaves it out. */
export type Composition = "mag" | "mac" | "mal";
export const COMPOSITIONS: readonly Composition[] = ["mag", "mac", "mal"];
/** MAC's number of persistent tokens when the spec leaves it out (docs/spec/composition.md#persistent). */
export const DEFAULT_PERSISTENT = 2;

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
  /** Absent: "mag", so every MAG spec written before the field existed means what it meant. */
  readonly pattern?: Composition;
  /** MAC only: n_p, the rows of W_persist (absent: DEFAULT_PERSISTENT). */
  readonly persistent?: number;
}

export interface Level {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
}

export interface Model {
  readonly spec: ModelSpec;
  readonly k: number;
  readonly pattern: Composition;
  /** n_p: MAC's persistent tokens; 0 in MAG and MAL. */
  readonly persistent: number;
  /** The attention block; under MAC its seq_len and window are the assembled length n_p + 2s (full causal). */
  readonly swa: Level;
  readonly levels: readonly Level[];
  /** D11: the level sum is scaled by 1/sqrt(k) only when k > 2 (null: no scale op at all). */
  readonly combineScale: number | null;
}

export const MODEL_PARAMS = ["W_embed", "W_q", "W_k", "W_v", "W_o", "W_unembed"] as const;
export type ModelParamName = (typeof MODEL_PARAMS)[number];
/** MAC's extra model parameter (docs/spec/names.md#persistent-tokens). */
export const PERSIST_PARAM = "W_persist";
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
  const pattern = spec.pattern ?? "mag";
  need(COMPOSITIONS.includes(pattern), `pattern = ${JSON.stringify(pattern)}, expected one of ${COMPOSITIONS.join(", ")}`);
  if (pattern !== "mac") need(spec.persistent === undefined, `persistent = ${spec.persistent}: persistent tokens exist only in the mac pattern`);
  const persistent = pattern === "mac" ? spec.persistent ?? DEFAULT_PERSISTENT : 0;
  need(Number.isInteger(persistent) && persistent >= (pattern === "mac" ? 1 : 0), `persistent = ${persistent}, expected an integer >= 1`);
  const base = { d: spec.d, seq_len: spec.seq_len };
  const swaDecl = ruleByKey("swa");
  // MAC: full causal attention over [W_persist; h; X] is the sliding-window rule with the window
  // equal to the assembled length (docs/spec/composition.md#mac-attention).
  const attnLen = pattern === "mac" ? persistent + 2 * spec.seq_len : spec.seq_len;
  const window = pattern === "mac" ? attnLen : spec.window;
  const levels = spec.levels.map((lv, l) => {
    need(isMemoryRule(lv.rule), `level ${l}: '${lv.rule}' is not a memory rule`);
    const decl = ruleByKey(lv.rule);
    return { decl, cfg: withDefaults(decl, { ...base, ...lv.hyper }) };
  });
  return {
    spec,
    k,
    pattern,
    persistent,
    swa: { decl: swaDecl, cfg: withDefaults(swaDecl, { d: spec.d, seq_len: attnLen, heads: spec.heads, window }) },
    levels,
    combineScale: k > 2 ? 1 / Math.sqrt(k) : null,
  };
}

export function modelParamShapes(spec: Pick<ModelSpec, "d" | "vocab">): Record<ModelParamName, number[]> {
  const { d, vocab: V } = spec;
  return { W_embed: [V, d], W_q: [d, d], W_k: [d, d], W_v: [d, d], W_o: [d, d], W_unembed: [d, V] };
}

/** The model record's names for this model: the six shared ones, plus W_persist under MAC. */
export function modelParamNames(model: Model): string[] {
  return model.pattern === "mac" ? [...MODEL_PARAMS, PERSIST_PARAM] : [...MODEL_PARAMS];
}

/** Shapes of modelParamNames(model). */
export function modelRecordShapes(model: Model): Record<string, number[]> {
  const shapes: Record<string, number[]> = modelParamShapes(model.spec);
  if (model.pattern === "mac") shapes[PERSIST_PARAM] = [model.persistent, model.spec.d];
  return shapes;
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
