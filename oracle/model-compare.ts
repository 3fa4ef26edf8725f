/**
 * Two model steps of the same case compared (the tape path vs the hand-written model backward):
 * loss bitwise, level decisions equal, every gradient that must carry signal within tolerance,
 * every other one exactly zero on both sides, and the error buffers.
 */
import { bitwiseEqual, compareTensors, emptyWorst, TOL_ULP, type Comparison } from "./compare.ts";
import { MODEL_PARAMS, levelParamNames, type Model } from "../src/model/config.ts";
import type { StepResult } from "../src/model/step.ts";
import { usedParams } from "../src/rules/level.ts";

function firstNonZero(t: ArrayLike<number>): number {
  for (let i = 0; i < t.length; i++) if (t[i] !== 0) return i;
  return -1;
}

/** Gradient names of a level that must carry gradient: the rule's used ones, plus the gate's. */
export function levelGradNames(model: Model, l: number): string[] {
  const used = usedParams(model.levels[l]!.decl);
  return model.spec.freq.kind === "learned" ? [...used, "w_freq", "b_freq"] : used;
}

/**
 * Compares two steps of the same case: loss bitwise, decisions equal, every gradient that must
 * carry signal within tol (with the vacuity rule), every other one exactly zero on both sides,
 * and the error buffers.
 */
export function compareSteps(model: Model, got: StepResult, want: StepResult, tol = TOL_ULP): Comparison {
  const fail = (message: string): Comparison => ({ ok: false, vacuous: false, worst: emptyWorst(), message });
  if (bitwiseEqual([got.loss], [want.loss]) !== -1) return fail(`loss differs: tape ${got.loss}, hand-written ${want.loss}`);
  if (got.active.join() !== want.active.join()) return fail(`active levels differ: tape [${got.active}], hand-written [${want.active}]`);
  const a: Record<string, ArrayLike<number>> = {}, b: Record<string, ArrayLike<number>> = {};
  for (const n of MODEL_PARAMS) {
    a[n] = got.grads.model[n].data;
    b[n] = want.grads.model[n].data;
  }
  for (let l = 0; l < model.k; l++) {
    const compared = new Set(want.active[l] ? levelGradNames(model, l) : model.spec.freq.kind === "learned" ? ["w_freq", "b_freq"] : []);
    for (const n of levelParamNames(model, l)) {
      const ga = got.grads.levels[l]![n]!.data, gb = want.grads.levels[l]![n]!.data;
      if (compared.has(n)) {
        a[`L${l}.${n}`] = ga;
        b[`L${l}.${n}`] = gb;
      } else {
        const i = firstNonZero(ga), j = firstNonZero(gb);
        if (i !== -1 || j !== -1) {
          return fail(`level ${l} ${n}: must get no step gradient (${want.active[l] ? "unused by the rule" : "frozen: routed to the error buffer"}), tape[${i}], hand-written[${j}]`);
        }
      }
    }
    const bufA = got.buffers[l]!, bufB = want.buffers[l]!;
    const keys = Object.keys(bufB).sort().join();
    if (Object.keys(bufA).sort().join() !== keys) return fail(`error buffer ${l}: tape {${Object.keys(bufA)}}, hand-written {${keys}}`);
    for (const n of Object.keys(bufB)) {
      a[`buffer${l}.${n}`] = bufA[n]!.data;
      b[`buffer${l}.${n}`] = bufB[n]!.data;
    }
  }
  return compareTensors(a, b, tol);
}
