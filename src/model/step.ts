/**
 * One training step's gradients, in the form the build loop consumes: the tape path here, the
 * hand-written path in oracle/cms-backward.ts. Both return a StepResult; frozen levels route
 * their parameter gradient (W_Q only) to the error buffer instead of the step's gradients (D13,
 * §9.4), while the learned gate's w_freq/b_freq gradients stay in the step's gradients (§9.7).
 */
import { withTape, type Tape } from "../tape.ts";
import type { Tensor } from "../tensor.ts";
import { levelParamNames, modelParamNames, type Model, type ModelParamName } from "./config.ts";
import type { LevelContext } from "./context.ts";
import { modelForward } from "./forward.ts";
import type { Batch } from "./mag.ts";
import { asTensor, type ModelGrads, type ModelParams, type TensorRecord } from "./params.ts";

export interface StepResult {
  readonly loss: number;
  readonly grads: ModelGrads;
  /** Per level: {W_Q} for a frozen level, {} for an active one (docs/spec/fixtures.md#rule-state). */
  readonly buffers: readonly TensorRecord[];
  readonly active: readonly boolean[];
  readonly gates: readonly number[] | null;
  readonly levelOutputs: readonly Tensor[];
  readonly context: readonly LevelContext[];
}

export type Stepper = (model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]) => StepResult;

/** The parameter names a frozen level sends to its error buffer. */
export const FROZEN_BUFFERED = ["W_Q"] as const;

/** Step gradient names of a frozen level: only the learned gate's, which are never buffered. */
function frozenStepNames(model: Model): readonly string[] {
  return model.spec.freq.kind === "learned" ? ["w_freq", "b_freq"] : [];
}

/** Registers every parameter on the tape (snapshots), keeping the model's layout. */
export function tapeParams(tape: Tape, p: ModelParams): ModelParams {
  const model = Object.fromEntries(Object.entries(p.model).map(([n, t]) => [n, tape.param(t)])) as Record<ModelParamName, Tensor>;
  const levels = p.levels.map((rec) => Object.fromEntries(Object.entries(rec).map(([n, t]) => [n, tape.param(t)])));
  return { model, levels };
}

/** Forward on a fresh tape, backward from the scalar loss, gradients read per parameter. */
export const tapeStep: Stepper = (model, params, batch, pulse, context) =>
  withTape((tape) => {
    const p = tapeParams(tape, params);
    const out = modelForward(model, p, batch, pulse, context);
    tape.backward(out.loss);
    const grad = (t: Tensor) => asTensor(tape.grad(t), t);
    const mp = p.model as Record<string, Tensor>;
    const gModel = Object.fromEntries(modelParamNames(model).map((n) => [n, grad(mp[n]!)])) as Record<ModelParamName, Tensor>;
    const levels: Record<string, Tensor>[] = [];
    const buffers: Record<string, Tensor>[] = [];
    model.levels.forEach((_, l) => {
      const rec = p.levels[l]!;
      const g: Record<string, Tensor> = {};
      const buf: Record<string, Tensor> = {};
      for (const n of levelParamNames(model, l)) {
        const t = grad(rec[n]!);
        if (out.active[l] || frozenStepNames(model).includes(n)) g[n] = t;
        else {
          g[n] = asTensor(null, t);
          if ((FROZEN_BUFFERED as readonly string[]).includes(n)) buf[n] = t;
          else if (t.data.some((x) => x !== 0)) throw new Error(`frozen level ${l}: parameter ${n} received a gradient (only W_Q may, D13)`);
        }
      }
      levels.push(g);
      buffers.push(buf);
    });
    return {
      loss: out.loss.data[0]!, grads: { model: gModel, levels }, buffers, active: out.active, gates: out.gates,
      levelOutputs: out.levelOutputs, context: out.context,
    };
  });
