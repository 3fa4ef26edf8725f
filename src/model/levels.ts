/**
 * What every composition pattern does with its memory levels (docs/spec/composition.md, docs/spec/titans-family.md#cms-combine,
 * docs/spec/decisions.md#d11): a level call on an input (the rule when active, the frozen read of the context when
 * not) and the level sum (left to right, times 1/sqrt(k) when k > 2, each term times its
 * learned-gate multiplier when the gate is on). Built from tape ops and the rules' opaque
 * blocks, so one code path serves the traced and the untraced forward.
 */
import { add, mul, scale } from "../ops/index.ts";
import { frozenForward, ruleForward } from "../rules/level.ts";
import type { Tensor } from "../tensor.ts";
import type { Model } from "./config.ts";
import { callState, keepContext, type LevelContext } from "./context.ts";
import type { GateForward } from "./freq-gate.ts";
import type { ModelParams } from "./params.ts";

export interface LevelCalls {
  readonly ys: Tensor[];
  /** The context after the calls: active levels' final memories, frozen levels' unchanged. */
  readonly next: LevelContext[];
}

/** Each level on input U: its rule from the context when active, its frozen read when not. */
export function callLevels(model: Model, params: ModelParams, U: Tensor, active: readonly boolean[],
  context: readonly LevelContext[]): LevelCalls {
  const ys: Tensor[] = [];
  const next: LevelContext[] = [];
  model.levels.forEach((lv, l) => {
    const state = callState(lv, context[l]!, U.dtype);
    if (active[l]) {
      const r = ruleForward(lv.decl, U, params.levels[l]!, state, lv.cfg);
      ys.push(r.y);
      next.push(keepContext(lv, r.finalState));
    } else {
      ys.push(frozenForward(lv.decl, U, params.levels[l]!, state, lv.cfg));
      next.push(context[l]!);
    }
  });
  return { ys, next };
}

/** Every level's frozen read of its context on input U, whatever the pulse (MAC's read stage). */
export function readLevels(model: Model, params: ModelParams, U: Tensor, context: readonly LevelContext[]): Tensor[] {
  return model.levels.map((lv, l) => frozenForward(lv.decl, U, params.levels[l]!, callState(lv, context[l]!, U.dtype), lv.cfg));
}

/** Σ_l y_l (each times its gate multiplier when `gate` is given), × 1/sqrt(k) when k > 2. */
export function levelSum(model: Model, ys: readonly Tensor[], gate: GateForward | null): Tensor {
  const parts = gate === null ? ys : ys.map((y, l) => mul([gate.multipliers[l]!, y], {}));
  let sum = parts[0]!;
  for (let l = 1; l < parts.length; l++) sum = add([sum, parts[l]!], {});
  return model.combineScale === null ? sum : scale([sum], { c: model.combineScale });
}
