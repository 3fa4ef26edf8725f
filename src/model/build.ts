/**
 * The build loop (docs/spec/titans-family.md#cms-error-buffers, docs/spec/decisions.md#d13): per step, read the pulse, forward and
 * backward (tape or hand-written, whichever Stepper is given), SGD on the step's gradients, buffer
 * the frozen levels' W_Q gradients, apply a level's buffer at its next active step, advance.
 */
import type { Model } from "./config.ts";
import { Conductor } from "./conductor.ts";
import type { LevelContext } from "./context.ts";
import { ErrorBuffers } from "./error-buffers.ts";
import type { Batch } from "./mag.ts";
import { sgdParams, type ModelParams } from "./params.ts";
import type { StepResult, Stepper } from "./step.ts";

export interface BuildOptions {
  readonly steps: number;
  readonly lr: number;
  readonly stepper: Stepper;
  /** Called after each step's updates, before the conductor advances (for checks that watch the loop). */
  readonly onStep?: (rec: BuildStepRecord) => void;
}

export interface BuildStepRecord {
  readonly step: number;
  readonly pulse: readonly boolean[];
  readonly result: StepResult;
  /** Levels whose buffer was applied at this step. */
  readonly applied: readonly number[];
  readonly buffers: ErrorBuffers;
  readonly params: ModelParams;
}

export interface BuildResult {
  readonly losses: number[];
  readonly context: readonly LevelContext[];
  readonly buffers: ErrorBuffers;
}

/** Runs the loop, updating `params` in place (pass a copy to keep the original). */
export function runBuild(model: Model, params: ModelParams, batch: Batch, context: readonly LevelContext[],
  opts: BuildOptions): BuildResult {
  const conductor = new Conductor(model.spec.chunk_sizes);
  const buffers = new ErrorBuffers(model.k);
  const losses: number[] = [];
  let ctx = context;
  for (let n = 0; n < opts.steps; n++) {
    const pulse = conductor.pulse().active;
    const r = opts.stepper(model, params, batch, pulse, ctx);
    losses.push(r.loss);
    sgdParams(params, r.grads, opts.lr);
    const applied: number[] = [];
    // r.active, not the pulse: under the learned gate the gate's decisions replace the pulse.
    r.active.forEach((on, l) => {
      if (!on) buffers.accumulate(l, r.buffers[l]!);
      else if (buffers.steps(l) > 0) {
        buffers.applyAndReset(l, params.levels[l]!, opts.lr);
        applied.push(l);
      }
    });
    ctx = r.context;
    opts.onStep?.({ step: n, pulse, result: r, applied, buffers, params });
    conductor.advance();
  }
  return { losses, context: ctx, buffers };
}
