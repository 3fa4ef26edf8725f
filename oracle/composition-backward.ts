/**
 * The hand-written oracles for the MAC and MAL models (docs/spec/composition.md#mac-backward, docs/spec/composition.md#mal-backward,
 * docs/spec/composition.md#gate-and-buffers; docs/spec/decisions.md#d10, docs/spec/decisions.md#d11, docs/spec/decisions.md#d12, docs/spec/decisions.md#d13): a forward that keeps what the
 * backward needs, from the numeric kernels and the rules' hand-written pieces, and the backward
 * written out by hand. Nothing here touches the tape, so C3 compares two derivations.
 */
import * as K from "../src/numeric.ts";
import { frozenBackward, frozenForwardSaved, ruleBackward, ruleForwardSaved } from "../src/rules/level.ts";
import { Tensor, alloc, clone, type Data, type DType } from "../src/tensor.ts";
import { levelParamNames, type Model } from "../src/model/config.ts";
import { callState, type LevelContext } from "../src/model/context.ts";
import type { Batch } from "../src/model/mag.ts";
import { validateParams, zeroGrads, type ModelGrads, type ModelParams } from "../src/model/params.ts";
import { FROZEN_BUFFERED, type StepResult, type Stepper } from "../src/model/step.ts";
import {
  addInto, checkIds, crossEntropy, embedBackward, fill, gateBackward, gateForward, logitGrad, type GateCache,
} from "./model-pieces.ts";
import { levelSum, stageForward, sumGrad, type LevelCache } from "./level-stage.ts";

type Grads = ReturnType<typeof zeroGrads>;
type Buffers = Record<string, Tensor>[];

/** W_Q's gradient of a frozen read goes to the buffer; an active level's joins its step gradient. */
function addWQ(out: Grads, buffers: Buffers, l: number, active: boolean, g: Tensor): void {
  if (active) addInto(out.levels[l]!.W_Q!.data, g.data);
  else for (const n of FROZEN_BUFFERED) {
    const have = buffers[l]![n];
    if (have === undefined) buffers[l]![n] = clone(g);
    else addInto(have.data, g.data);
  }
}

/** Backward of a stage of level calls: parameter gradients or buffers, and dU += Σ_l dU_l. */
function stageBackward(model: Model, levels: readonly LevelCache[], dy: Tensor, out: Grads, buffers: Buffers, dU: Data): void {
  levels.forEach((lv, l) => {
    const { decl, cfg } = model.levels[l]!;
    if (lv.active) {
      const g = ruleBackward(decl, lv.saved, dy, cfg);
      addInto(dU, g.X!.data);
      for (const n of levelParamNames(model, l)) if (g[n] !== undefined) addInto(out.levels[l]![n]!.data, g[n]!.data);
    } else {
      const g = frozenBackward(decl, lv.saved, dy, cfg);
      addInto(dU, g.X.data);
      addWQ(out, buffers, l, false, g.W_Q);
    }
  });
}

/** What both patterns start from: checks, the embedded X, the gate and the decisions. */
function begin(model: Model, params: ModelParams, batch: Batch, pulse: readonly boolean[]) {
  const dt = params.model.W_embed.dtype;
  validateParams(model, params, dt);
  const { seq_len: s, d, vocab: V } = model.spec;
  if (batch.ids.length !== s) throw new Error(`input ids: length ${batch.ids.length}, expected seq_len = ${s}`);
  checkIds(batch.ids, V);
  const X = alloc(dt, s * d);
  batch.ids.forEach((ix, t) => X.set(params.model.W_embed.data.subarray(ix * d, ix * d + d), t * d));
  const freq = model.spec.freq;
  const gate: GateCache | null = freq.kind === "learned" ? gateForward(model, params, X, dt) : null;
  const active = gate === null ? pulse : model.levels.map((_, l) => l === 0 || gate.g[l]! > (freq as { threshold: number }).threshold);
  if (active.length !== model.k) throw new Error(`pulse has ${active.length} entries, k = ${model.k}`);
  return { dt, X, Xt: new Tensor(dt, [s, d], X), gate, active };
}

/** logits = (H W_oᵀ) W_unembed and the loss; the backward to dH (and dW_o, dW_unembed). */
function head(model: Model, params: ModelParams, H: Data, targets: readonly number[], dt: DType) {
  const { seq_len: s, d, vocab: V } = model.spec;
  const P = params.model;
  const Pr = K.matmulTB(H, P.W_o.data, s, d, d, alloc(dt, s * d));
  const Z = K.matmul(Pr, P.W_unembed.data, s, d, V, alloc(dt, s * V));
  const loss = crossEntropy(Z, targets, s, V, dt);
  const backward = (out: Grads): Data => {
    const dZ = logitGrad(Z, targets, s, V, dt);
    const dPr = K.matmulTB(dZ, P.W_unembed.data, s, V, d, alloc(dt, s * d));
    K.matmulTA(Pr, dZ, d, s, V, out.model.W_unembed.data);
    K.matmulTA(dPr, H, d, s, d, out.model.W_o.data);
    return K.matmul(dPr, P.W_o.data, s, d, d, alloc(dt, s * d));
  };
  return { loss, backward };
}

function result(loss: number, grads: ModelGrads, buffers: Buffers, active: readonly boolean[], gate: GateCache | null,
  ys: readonly Tensor[], context: readonly LevelContext[]): StepResult {
  return { loss, grads, buffers, active: [...active], gates: gate === null ? null : Array.from(gate.g), levelOutputs: ys, context };
}

/** MAC (docs/spec/composition.md#mac-forward, docs/spec/composition.md#mac-backward). */
export const macStep: Stepper = (model, params, batch, pulse, context) => {
  const { dt, X, Xt, gate, active } = begin(model, params, batch, pulse);
  const { seq_len: s, d } = model.spec;
  const np = model.persistent, P = params.model;
  const W_persist = P.W_persist;
  if (W_persist === undefined) throw new Error("model parameter W_persist is missing (the mac pattern's persistent tokens)");
  // Read stage: every level's frozen read of its context, before any write.
  const reads = model.levels.map((lv, l) => frozenForwardSaved(lv.decl, Xt, params.levels[l]!, callState(lv, context[l]!, dt), lv.cfg));
  const h = levelSum(model, reads.map((r) => r.y.data), dt);
  const n = np + 2 * s;
  const S = alloc(dt, n * d);
  S.set(W_persist.data, 0);
  S.set(h, np * d);
  S.set(X, (np + s) * d);
  const attn = ruleForwardSaved(model.swa.decl, new Tensor(dt, [n, d], S), { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg);
  const Y = attn.y.data.slice((np + s) * d, n * d);
  const write = stageForward(model, params, new Tensor(dt, [s, d], Y), active, context);
  const r = levelSum(model, write.levels.map((lv) => lv.y.data), dt);
  const G = fill(dt, s * d, (i) => K.sigmoid(r[i]!));
  const O = fill(dt, s * d, (i) => Y[i]! * G[i]!);
  const hd = head(model, params, O, batch.targets, dt);

  const out = zeroGrads(model, dt);
  const buffers: Buffers = model.levels.map(() => ({}));
  const dO = hd.backward(out);
  const dY = fill(dt, s * d, (i) => dO[i]! * G[i]!);
  const dr = fill(dt, s * d, (i) => dO[i]! * Y[i]! * (G[i]! * (1 - G[i]!)));
  const drSum = sumGrad(model, dr, dt, [s, d]);
  stageBackward(model, write.levels, drSum, out, buffers, dY);
  // Only the segment's own rows of Ã were used: the others get zero gradient.
  const dAt = alloc(dt, n * d);
  dAt.set(dY, (np + s) * d);
  const g = ruleBackward(model.swa.decl, attn.saved, new Tensor(dt, [n, d], dAt), model.swa.cfg);
  for (const name of ["W_q", "W_k", "W_v"] as const) out.model[name].data.set(g[name]!.data);
  const dS = g.X!.data;
  out.model.W_persist!.data.set(dS.subarray(0, np * d));
  const dhSum = sumGrad(model, dS.slice(np * d, (np + s) * d), dt, [s, d]);
  const dX = dS.slice((np + s) * d, n * d);
  reads.forEach((rd, l) => {
    const gr = frozenBackward(model.levels[l]!.decl, rd.saved, dhSum, model.levels[l]!.cfg);
    addInto(dX, gr.X.data);
    addWQ(out, buffers, l, active[l]!, gr.W_Q);
  });
  const ys = write.levels.map((lv) => lv.y);
  if (gate !== null) gateBackward(model, params, gate, drSum.data, ys, out, dX);
  embedBackward(batch.ids, dX, d, out.model.W_embed.data);
  return result(hd.loss, out, buffers, active, gate, ys, write.next);
};

/** MAL (docs/spec/composition.md#mal-forward, docs/spec/composition.md#mal-backward). */
export const malStep: Stepper = (model, params, batch, pulse, context) => {
  const { dt, X, Xt, gate, active } = begin(model, params, batch, pulse);
  const { seq_len: s, d } = model.spec;
  const P = params.model;
  const mem = stageForward(model, params, Xt, active, context);
  const m = levelSum(model, mem.levels.map((lv) => lv.y.data), dt);
  const U = fill(dt, s * d, (i) => X[i]! + m[i]!);
  const attn = ruleForwardSaved(model.swa.decl, new Tensor(dt, [s, d], U), { W_q: P.W_q, W_k: P.W_k, W_v: P.W_v }, {}, model.swa.cfg);
  const hd = head(model, params, attn.y.data, batch.targets, dt);

  const out = zeroGrads(model, dt);
  const buffers: Buffers = model.levels.map(() => ({}));
  const dA = hd.backward(out);
  const g = ruleBackward(model.swa.decl, attn.saved, new Tensor(dt, [s, d], dA), model.swa.cfg);
  for (const name of ["W_q", "W_k", "W_v"] as const) out.model[name].data.set(g[name]!.data);
  const dU = g.X!.data;
  // U = X + m: the residual passes dU to X unchanged; the levels get dU through the sum.
  const dX = dU.slice();
  const dmSum = sumGrad(model, dU, dt, [s, d]);
  stageBackward(model, mem.levels, dmSum, out, buffers, dX);
  const ys = mem.levels.map((lv) => lv.y);
  if (gate !== null) gateBackward(model, params, gate, dmSum.data, ys, out, dX);
  embedBackward(batch.ids, dX, d, out.model.W_embed.data);
  return result(hd.loss, out, buffers, active, gate, ys, mem.next);
};
