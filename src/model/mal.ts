/**
 * The MAL model (memory as a layer) with CMS levels, forward (docs/spec/composition.md#mal-forward):
 *   X = W_embed[ids] ;  m_l = rule_l(X) when active, frozen read_l(X) when not
 *   m = Σ_l m_l (× gate multipliers, × 1/sqrt(k) when k > 2) ;  U = X + m
 *   A = SWA(U W_qᵀ, U W_kᵀ, U W_vᵀ) (the model's window) ;  logits = (A W_oᵀ) W_unembed ;  loss (D12)
 * ONE code path from tape ops and the rules' opaque blocks, as magForward.
 */
import { add, crossEntropy, embedLookup, matmul, matmulTransposeB } from "../ops/index.ts";
import { ruleForward } from "../rules/level.ts";
import type { Model } from "./config.ts";
import type { LevelContext } from "./context.ts";
import { callLevels, levelSum } from "./levels.ts";
import { checkCall, decide, type Batch, type ModelOutput } from "./mag.ts";
import type { ModelParams } from "./params.ts";

export function malForward(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]): ModelOutput {
  checkCall(model, params, batch, context);
  const P = params.model;
  const X = embedLookup([P.W_embed], { indices: batch.ids });
  const { gate, active } = decide(model, params, X, pulse);
  const { ys, next } = callLevels(model, params, X, active, context);
  // The residual keeps attention's input non-degenerate when the memories start at zero (composition.md#choices).
  const U = add([X, levelSum(model, ys, gate)], {});
  const A = ruleForward(model.swa.decl, U, { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg).y;
  const logits = matmul([matmulTransposeB([A, P.W_o], {}), P.W_unembed], {});
  const loss = crossEntropy([logits], { targets: batch.targets });
  return { loss, levelOutputs: ys, active: [...active], gates: gate?.values ?? null, context: next };
}
