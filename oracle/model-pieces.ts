/**
 * Pieces every hand-written model oracle shares (docs/spec/titans-family.md#mag-backward, docs/spec/composition.md): rounding
 * stores, the D12 loss and its logit gradient, the learned gate's forward and straight-through
 * backward (D10), the embedding scatter. Numeric kernels only, no tape.
 */
import * as K from "../src/numeric.ts";
import { Tensor, alloc, type Data, type DType } from "../src/tensor.ts";
import type { Model } from "../src/model/config.ts";
import type { ModelParams } from "../src/model/params.ts";

export interface GateCache {
  /** m̄ as the forward rounded it, [d]. */
  readonly mean: Data;
  readonly g: Data;
}

/** Stores f(i) into a fresh array of the run's dtype: one rounding per element, like the ops. */
export function fill(dt: DType, n: number, f: (i: number) => number): Data {
  const out = alloc(dt, n);
  for (let i = 0; i < n; i++) out[i] = f(i);
  return out;
}

export function checkIds(ids: readonly number[], V: number): void {
  ids.forEach((ix, t) => {
    if (!Number.isInteger(ix) || ix < 0 || ix >= V) throw new Error(`input id [${t}] = ${ix} is out of range [0, ${V})`);
  });
}

/** D12 validation and the mean cross entropy over valid targets, accumulated as the op does. */
export function crossEntropy(Z: Data, targets: readonly number[], s: number, V: number, dt: DType): number {
  if (targets.length !== s) throw new Error(`targets: length ${targets.length}, expected ${s}`);
  let total = 0, n = 0;
  for (let t = 0; t < s; t++) {
    const tg = targets[t]!;
    if (!Number.isInteger(tg) || tg < -1 || tg >= V) throw new Error(`targets[${t}] = ${tg} is invalid (D12)`);
    if (tg < 0) continue;
    const o = t * V;
    let mx = -Infinity;
    for (let j = 0; j < V; j++) mx = Math.max(mx, Z[o + j]!);
    let se = 0;
    for (let j = 0; j < V; j++) se += Math.exp(Z[o + j]! - mx);
    total += mx + Math.log(se) - Z[o + tg]!;
    n++;
  }
  return fill(dt, 1, () => (n === 0 ? 0 : total / n))[0]!;
}

export function gateForward(model: Model, params: ModelParams, X: Data, dt: DType): GateCache {
  const { seq_len: s, d } = model.spec;
  const sums = new Float64Array(d);
  for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) sums[j]! += X[t * d + j]!;
  const rounded = fill(dt, d, (j) => sums[j]!);
  const mean = fill(dt, d, (j) => (1 / s) * rounded[j]!);
  const g = fill(dt, model.k, (l) => {
    const p = params.levels[l]!;
    const dot = fill(dt, 1, () => K.dot(mean, p.w_freq!.data, d))[0]!;
    return K.sigmoid(fill(dt, 1, () => dot + p.b_freq!.data[0]!)[0]!);
  });
  return { mean, g };
}

/** dL/dlogits of the mean cross entropy: (softmax − onehot)/n on valid rows, 0 on padding. */
export function logitGrad(Z: Data, targets: readonly number[], s: number, V: number, dt: DType): Data {
  const n = targets.filter((t) => t >= 0).length;
  const dZ = alloc(dt, s * V);
  if (n === 0) return dZ;
  const p = K.softmaxRows(Z, s, V, new Float64Array(s * V));
  for (let t = 0; t < s; t++) {
    const tg = targets[t]!;
    if (tg < 0) continue;
    for (let j = 0; j < V; j++) dZ[t * V + j] = (p[t * V + j]! - (j === tg ? 1 : 0)) / n;
  }
  return dZ;
}

export function addInto(acc: Data, x: Data): void {
  for (let i = 0; i < acc.length; i++) acc[i]! += x[i]!;
}

/**
 * The learned gate's straight-through backward (D10): dg_l = <dSum, y_l> for every level (true
 * sign), dp_l = dg_l g_l (1 − g_l); writes w_freq, b_freq into `out` and adds the mean's term to dX.
 * `ys` are the outputs that entered the gated sum, `dSum` the gradient of that sum after the scale.
 */
export function gateBackward(model: Model, params: ModelParams, gate: GateCache, dSum: Data, ys: readonly Tensor[],
  out: { levels: Record<string, Tensor>[] }, dX: Data): void {
  const { seq_len: s, d } = model.spec;
  const dMean = new Float64Array(d);
  ys.forEach((y, l) => {
    const g = gate.g[l]!;
    const dp = K.dot(dSum, y.data) * (g * (1 - g));
    const rec = out.levels[l]!, w = params.levels[l]!.w_freq!.data;
    for (let j = 0; j < d; j++) {
      rec.w_freq!.data[j] = dp * gate.mean[j]!;
      dMean[j]! += dp * w[j]!;
    }
    rec.b_freq!.data[0] = dp;
  });
  for (let t = 0; t < s; t++) for (let j = 0; j < d; j++) dX[t * d + j]! += dMean[j]! / s;
}

/** dW_embed[ids[t]] += dX[t] (scatter-add; repeated ids accumulate). */
export function embedBackward(ids: readonly number[], dX: Data, d: number, dE: Data): void {
  ids.forEach((ix, t) => {
    for (let j = 0; j < d; j++) dE[ix * d + j]! += dX[t * d + j]!;
  });
}
