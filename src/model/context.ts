/**
 * Context memory per level (docs/spec/titans-family.md#cms-context, docs/spec/decisions.md#d4 and "Fixture details"). It
 * persists across steps; an active level starts its call from it and leaves its final state
 * there, a frozen level reads it without writing. Only the memory persists: Titans' and Atlas'
 * momentum S restarts at zero every call, and Moneta's A1/A2 and YAAD's B1/B2 are derived from
 * W1/W2 inside each call, so they are not in a rule's state at all.
 */
import type { State } from "../rules/types.ts";
import { zeros, type DType } from "../tensor.ts";
import type { Level, Model } from "./config.ts";

export type LevelContext = State;

/** State entries that restart at zero every call, as the rule declares them. */
export function transientKeys(level: Level): readonly string[] {
  return level.decl.stepLocalState ?? [];
}

/** The state names a level's context keeps. */
export function contextKeys(level: Level): string[] {
  const transient = transientKeys(level);
  return Object.keys(level.decl.stateShapes(level.cfg)).filter((n) => !transient.includes(n));
}

/** D4: a context that was never written is the rule's own initial state. */
export function initContext(model: Model, dtype: DType): LevelContext[] {
  return model.levels.map((lv) => keepContext(lv, lv.decl.init(lv.cfg, dtype)));
}

/** The part of a state the context keeps (drops transient entries and anything undeclared). */
export function keepContext(level: Level, state: State): LevelContext {
  const out: Record<string, ReturnType<typeof zeros>> = {};
  for (const n of contextKeys(level)) {
    const t = state[n];
    if (t === undefined) throw new Error(`level rule '${level.decl.key}': state ${n} is missing from the context`);
    out[n] = t;
  }
  return out;
}

/** The full state a call starts from: the context plus zeroed transient entries. */
export function callState(level: Level, ctx: LevelContext, dtype: DType): State {
  const shapes = level.decl.stateShapes(level.cfg);
  const out: Record<string, ReturnType<typeof zeros>> = { ...keepContext(level, ctx) };
  for (const n of transientKeys(level)) out[n] = zeros(dtype, shapes[n]!);
  return out;
}
