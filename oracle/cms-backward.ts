/**
 * The hand-written oracle for the whole MAG + CMS model (MAC and MAL: composition-backward.ts) (docs/spec/titans-family.md#mag-backward, docs/spec/titans-family.md#cms-combine, docs/spec/titans-family.md#cms-error-buffers,
 * §9.7 with docs/spec/decisions.md#d10, docs/spec/decisions.md#d11, docs/spec/decisions.md#d12, docs/spec/decisions.md#d13): a forward that keeps what the backward needs, written with the
 * numeric kernels and the rules' hand-written pieces (ruleForwardSaved / ruleBackward,
 * frozenForwardSaved / frozenBackward), and the model's backward written out by hand. Nothing
 * here touches the tape or the tape ops, so C3 compares two independent derivations.
 */
import * as K from "../src/numeric.ts";
import { frozenBackward, ruleBackward, ruleForwardSaved } from "../src/rules/level.ts";
import { Tensor, alloc, type Data, type DType } from "../src/tensor.ts";
import { levelParamNames, type Model } from "../src/model/config.ts";
import type { LevelContext } from "../src/model/context.ts";
import type { Batch } from "../src/model/mag.ts";
import { validateParams, zeroGrads, type ModelParams } from "../src/model/params.ts";
import {
  addInto, checkIds, crossEntropy, embedBackward, fill, gateBackward, gateForward, logitGrad, type GateCache,
} from "./model-pieces.ts";
import { FROZEN_BUFFERED, type StepResult, type Stepper } from "../src/model/step.ts";
import { macStep, malStep } from "./composition-backward.ts";
import { levelSum, stageForward, sumGrad, type LevelCache } from "./level-stage.ts";

export interface CmsCache {
  readonly model: Model;
  readonly params: ModelParams;
  readonly batch: Batch;
  readonly dtype: DType;
  readonly X: Data;
  readonly swaSaved: Record<string, Tensor>;
  readonly A: Data;
  readonly levels: readonly LevelCache[];
  readonly gate: GateCache | null;
  readonly G: Data;
  readonly O: Data;
  readonly Pr: Data;
  readonly Z: Data;
  readonly loss: number;
  readonly context: readonly LevelContext[];
}

/** The forward, keeping every intermediate the backward reads. */
export function cmsForward(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[],
  context: readonly LevelContext[]): CmsCache {
  const dt = params.model.W_embed.dtype;
  validateParams(model, params, dt);
  const { seq_len: s, d, vocab: V } = model.spec;
  if (batch.ids.length !== s) throw new Error(`input ids: length ${batch.ids.length}, expected seq_len = ${s}`);
  checkIds(batch.ids, V);
  const P = params.model;
  const X = alloc(dt, s * d);
  batch.ids.forEach((ix, t) => X.set(P.W_embed.data.subarray(ix * d, ix * d + d), t * d));
  const Xt = new Tensor(dt, [s, d], X);

  const swa = ruleForwardSaved(model.swa.decl, Xt, { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg);
  const freq = model.spec.freq;
  const threshold = freq.kind === "learned" ? freq.threshold : null;
  const gate = threshold === null ? null : gateForward(model, params, X, dt);
  const active = gate === null ? pulse : model.levels.map((_, l) => l === 0 || gate.g[l]! > threshold!);
  if (active.length !== model.k) throw new Error(`pulse has ${active.length} entries, k = ${model.k}`);

  const { levels, next } = stageForward(model, params, Xt, active, context);
  // Σ_l y_l, left to right, each partial sum rounded to the dtype (the order the model adds in).
  const combined = levelSum(model, levels.map((lv) => lv.y.data), dt);
  const G = fill(dt, s * d, (i) => K.sigmoid(combined[i]!));
  const A = swa.y.data;
  const O = fill(dt, s * d, (i) => A[i]! * G[i]!);
  const Pr = K.matmulTB(O, P.W_o.data, s, d, d, alloc(dt, s * d));
  const Z = K.matmul(Pr, P.W_unembed.data, s, d, V, alloc(dt, s * V));
  const loss = crossEntropy(Z, batch.targets, s, V, dt);
  return { model, params, batch, dtype: dt, X, swaSaved: swa.saved, A, levels, gate, G, O, Pr, Z, loss, context: next };
}

export interface CmsGrads {
  readonly grads: StepResult["grads"];
  readonly buffers: StepResult["buffers"];
}

/** The model's backward by hand (§8.2 with §9.3's level sum and routing, §9.7 under D10). */
export function cmsBackward(c: CmsCache): CmsGrads {
  const { model, params, dtype: dt } = c;
  const { seq_len: s, d, vocab: V } = model.spec;
  const P = params.model;
  const out = zeroGrads(model, dt);

  const dZ = logitGrad(c.Z, c.batch.targets, s, V, dt);
  const dPr = K.matmulTB(dZ, P.W_unembed.data, s, V, d, alloc(dt, s * d));
  K.matmulTA(c.Pr, dZ, d, s, V, out.model.W_unembed.data);
  const dO = K.matmul(dPr, P.W_o.data, s, d, d, alloc(dt, s * d));
  K.matmulTA(dPr, c.O, d, s, d, out.model.W_o.data);
  const dA = fill(dt, s * d, (i) => dO[i]! * c.G[i]!);
  // Through O = A ⊙ G and G = sigmoid(combined); then every level gets the same gradient of the
  // unscaled sum (the 1/sqrt(k) applied here, §9.3).
  const dComb = fill(dt, s * d, (i) => dO[i]! * c.A[i]! * (c.G[i]! * (1 - c.G[i]!)));
  const dSum = sumGrad(model, dComb, dt, [s, d]);

  const dX = alloc(dt, s * d);
  const swaG = ruleBackward(model.swa.decl, c.swaSaved, new Tensor(dt, [s, d], dA), model.swa.cfg);
  addInto(dX, swaG.X!.data);
  for (const n of ["W_q", "W_k", "W_v"] as const) out.model[n].data.set(swaG[n]!.data);

  const buffers: Record<string, Tensor>[] = [];
  c.levels.forEach((lv, l) => {
    const { decl, cfg } = model.levels[l]!;
    if (lv.active) {
      const g = ruleBackward(decl, lv.saved, dSum, cfg);
      addInto(dX, g.X!.data);
      for (const n of levelParamNames(model, l)) if (g[n] !== undefined) out.levels[l]![n]!.data.set(g[n]!.data);
      buffers.push({});
    } else {
      const g = frozenBackward(decl, lv.saved, dSum, cfg);
      addInto(dX, g.X.data);
      const buf: Record<string, Tensor> = {};
      for (const n of FROZEN_BUFFERED) buf[n] = g[n];
      buffers.push(buf);
    }
  });

  if (c.gate !== null) gateBackward(model, params, c.gate, dSum.data, c.levels.map((lv) => lv.y), out, dX);
  embedBackward(c.batch.ids, dX, d, out.model.W_embed.data);
  return { grads: out, buffers };
}

/** One step through the oracle for the model's pattern, in the build loop's form. */
export const cmsStep: Stepper = (model, params, batch, pulse, context) => {
  if (model.pattern === "mac") return macStep(model, params, batch, pulse, context);
  if (model.pattern === "mal") return malStep(model, params, batch, pulse, context);
  const c = cmsForward(model, params, batch, pulse, context);
  const { grads, buffers } = cmsBackward(c);
  return {
    loss: c.loss, grads, buffers, active: c.levels.map((lv) => lv.active), gates: c.gate === null ? null : Array.from(c.gate.g),
    levelOutputs: c.levels.map((lv) => lv.y), context: c.context,
  };
};
