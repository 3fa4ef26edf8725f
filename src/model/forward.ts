/**
 * The model's forward for its composition pattern (docs/spec/composition.md): the one entry point the build
 * loop, the tape step and the checks call. Every pattern is one code path for the traced and
 * the untraced forward.
 */
import type { Model } from "./config.ts";
import type { LevelContext } from "./context.ts";
import { macForward } from "./mac.ts";
import { magForward, type Batch, type ModelOutput } from "./mag.ts";
import { malForward } from "./mal.ts";
import type { ModelParams } from "./params.ts";

const FORWARDS = { mag: magForward, mac: macForward, mal: malForward } as const;

export function modelForward(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]): ModelOutput {
  return FORWARDS[model.pattern](model, params, batch, pulse, context);
}
