/**
 * Model parameters and gradients: the model's six matrices (plus W_persist under MAC,
 * docs/spec/names.md#persistent-tokens) and one named record per level.
 */
import { Tensor, clone, expectShape, zeros, type DType } from "../tensor.ts";
import { levelParamShapes, modelParamNames, modelRecordShapes, type Model, type ModelParamName } from "./config.ts";

export type TensorRecord = Readonly<Record<string, Tensor>>;

export interface ModelParams {
  readonly model: Readonly<Record<ModelParamName, Tensor>> & { readonly W_persist?: Tensor };
  readonly levels: readonly TensorRecord[];
}

/** Same layout as ModelParams: every canonical parameter, zero where no gradient reached it. */
export type ModelGrads = ModelParams;

export function cloneParams(p: ModelParams): ModelParams {
  return { model: cloneRecord(p.model) as ModelParams["model"], levels: p.levels.map(cloneRecord) };
}

export function cloneRecord(r: TensorRecord): Record<string, Tensor> {
  return Object.fromEntries(Object.entries(r).map(([n, t]) => [n, clone(t)]));
}

export function zeroGrads(model: Model, dtype: DType): { model: Record<ModelParamName, Tensor> & { W_persist?: Tensor }; levels: Record<string, Tensor>[] } {
  const shapes = modelRecordShapes(model);
  const m = Object.fromEntries(modelParamNames(model).map((n) => [n, zeros(dtype, shapes[n]!)])) as Record<ModelParamName, Tensor>;
  const levels = model.levels.map((_, l) =>
    Object.fromEntries(Object.entries(levelParamShapes(model, l)).map(([n, s]) => [n, zeros(dtype, s)])));
  return { model: m, levels };
}

/** Throws naming the first parameter that is missing or has the wrong shape or dtype. */
export function validateParams(model: Model, p: ModelParams, dtype: DType): void {
  const shapes = modelRecordShapes(model);
  for (const n of modelParamNames(model)) {
    const t = (p.model as Record<string, Tensor | undefined>)[n];
    if (t === undefined) throw new Error(`model parameter ${n} is missing${n === "W_persist" ? " (the mac pattern's persistent tokens)" : ""}`);
    expectShape(t, shapes[n]!, `model parameter ${n}`);
    if (t.dtype !== dtype) throw new Error(`model parameter ${n} is ${t.dtype}, the run is ${dtype}`);
  }
  if (p.levels.length !== model.k) throw new Error(`${p.levels.length} level parameter records, k = ${model.k}`);
  p.levels.forEach((rec, l) => {
    for (const [n, s] of Object.entries(levelParamShapes(model, l))) {
      const t = rec[n];
      if (t === undefined) throw new Error(`level ${l} (${model.levels[l]!.decl.key}): parameter ${n} is missing`);
      expectShape(t, s, `level ${l} parameter ${n}`);
      if (t.dtype !== dtype) throw new Error(`level ${l} parameter ${n} is ${t.dtype}, the run is ${dtype}`);
    }
  });
}

/** Plain SGD in place (D13): p −= lr·g, rounded once into the parameter's dtype. */
export function sgdInPlace(p: Tensor, g: Tensor, lr: number): void {
  const pd = p.data, gd = g.data;
  for (let i = 0; i < pd.length; i++) pd[i] = pd[i]! - lr * gd[i]!;
}

export function sgdParams(params: ModelParams, grads: ModelGrads, lr: number): void {
  for (const [n, g] of Object.entries(grads.model)) sgdInPlace((params.model as Record<string, Tensor>)[n]!, g, lr);
  params.levels.forEach((rec, l) => {
    for (const [n, g] of Object.entries(grads.levels[l]!)) sgdInPlace(rec[n]!, g, lr);
  });
}

export function asTensor(t: Tensor | null, like: Tensor): Tensor {
  return t ?? zeros(like.dtype, like.shape);
}
