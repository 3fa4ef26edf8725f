/**
 * The level stage shared by the model oracles (MAG + CMS, MAC, MAL): every level called on one input,
 * the rule when active and the frozen read when not, and the level sum with its gradient (D11).
 */
import { frozenForwardSaved, ruleForwardSaved } from "../src/rules/level.ts";
import { Tensor, type Data, type DType } from "../src/tensor.ts";
import type { Model } from "../src/model/config.ts";
import { callState, keepContext, type LevelContext } from "../src/model/context.ts";
import type { ModelParams } from "../src/model/params.ts";
import { fill } from "./model-pieces.ts";

export interface LevelCache {
  readonly active: boolean;
  readonly y: Tensor;
  readonly saved: Record<string, Tensor>;
}

/** Level calls on input U: the rule from the context when active, the frozen read when not. */
export function stageForward(model: Model, params: ModelParams, U: Tensor, active: readonly boolean[],
  context: readonly LevelContext[]): { levels: LevelCache[]; next: LevelContext[] } {
  const levels: LevelCache[] = [], next: LevelContext[] = [];
  model.levels.forEach((lv, l) => {
    const state = callState(lv, context[l]!, U.dtype);
    if (active[l]) {
      const r = ruleForwardSaved(lv.decl, U, params.levels[l]!, state, lv.cfg);
      levels.push({ active: true, y: r.y, saved: r.saved });
      next.push(keepContext(lv, r.finalState));
    } else {
      levels.push({ active: false, ...frozenForwardSaved(lv.decl, U, params.levels[l]!, state, lv.cfg) });
      next.push(context[l]!);
    }
  });
  return { levels, next };
}

/** Σ_l y_l left to right, each partial sum rounded, then × 1/sqrt(k) when k > 2 (D11). */
export function levelSum(model: Model, ys: readonly Data[], dt: DType): Data {
  let sum = ys[0]!;
  for (let l = 1; l < ys.length; l++) {
    const prev = sum, y = ys[l]!;
    sum = fill(dt, sum.length, (i) => prev[i]! + y[i]!);
  }
  const c = model.combineScale;
  return c === null ? sum : fill(dt, sum.length, (i) => c * sum[i]!);
}

/** dy of every term of the level sum from the gradient of its (scaled) result. */
export function sumGrad(model: Model, d: Data, dt: DType, shape: number[]): Tensor {
  const c = model.combineScale;
  return new Tensor(dt, shape, c === null ? d : fill(dt, d.length, (i) => c * d[i]!));
}

