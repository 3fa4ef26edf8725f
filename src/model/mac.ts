/**
 * The MAC model (memory as context) with CMS levels, forward (docs/spec/composition.md#mac-forward):
 *   X = W_embed[ids] ;  h = Σ_l frozen read_l(X) (× 1/sqrt(k) when k > 2), every level, before any write
 *   S = [W_persist ; h ; X] ;  Ã = causal attention of S (the SWA rule, window = n_p + 2s)
 *   Y = the last s rows of Ã ;  r_l = rule_l(Y) when active, frozen read_l(Y) when not
 *   r = Σ_l r_l (× gate multipliers, × 1/sqrt(k) when k > 2) ;  O = Y ⊙ sigmoid(r)
 *   logits = (O W_oᵀ) W_unembed ;  loss = cross entropy (D12)
 * ONE code path from tape ops and the rules' opaque blocks, as magForward.
 */
import { concat, crossEntropy, embedLookup, matmul, matmulTransposeB, mul, sigmoid, slice } from "../ops/index.ts";
import { ruleForward } from "../rules/level.ts";
import type { Model } from "./config.ts";
import type { LevelContext } from "./context.ts";
import { callLevels, levelSum, readLevels } from "./levels.ts";
import { checkCall, decide, type Batch, type ModelOutput } from "./mag.ts";
import type { ModelParams } from "./params.ts";

export function macForward(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]): ModelOutput {
  checkCall(model, params, batch, context);
  const P = params.model;
  const s = model.spec.seq_len, np = model.persistent;
  if (P.W_persist === undefined) throw new Error("model parameter W_persist is missing (the mac pattern's persistent tokens)");

  const X = embedLookup([P.W_embed], { indices: batch.ids });
  const { gate, active } = decide(model, params, X, pulse);
  // Read stage: every level reads its context as it stood before this step's writes.
  const hs = readLevels(model, params, X, context);
  const h = levelSum(model, hs, null);

  const S = concat([P.W_persist, h, X], { axis: 0 });
  const At = ruleForward(model.swa.decl, S, { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg).y;
  const Y = slice([At], { axis: 0, start: np + s, len: s });

  // Write stage on Y, from the same context memories the read stage saw.
  const { ys, next } = callLevels(model, params, Y, active, context);
  const r = levelSum(model, ys, gate);

  const O = mul([Y, sigmoid([r], {})], {});
  const logits = matmul([matmulTransposeB([O, P.W_o], {}), P.W_unembed], {});
  const loss = crossEntropy([logits], { targets: batch.targets });
  return { loss, levelOutputs: ys, readOutputs: hs, active: [...active], gates: gate?.values ?? null, context: next };
}
