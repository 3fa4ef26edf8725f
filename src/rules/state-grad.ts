/**
 * The two ends of a state adjoint (docs/spec/state-gradients.md): a backward loop starts its
 * f64 adjoint of the final state from the caller's dFinal (absent = zero) and hands back what the
 * adjoint holds after token 0 as the initial state's gradient, in the run's dtype.
 */
import { Tensor, alloc, type DType } from "../tensor.ts";
import type { State } from "./types.ts";

/** A fresh f64 adjoint of `size` entries holding dFinal[name], or zeros when it is absent. */
export function adjointFrom(dFinal: State | undefined, name: string, size: number): Float64Array<ArrayBuffer> {
  const out = new Float64Array(size);
  const g = dFinal?.[name];
  if (g === undefined) return out;
  if (g.size !== size) throw new Error(`dFinal.${name}: ${g.size} elements, the state has ${size}`);
  out.set(g.data);
  return out;
}

/** An f64 adjoint stored as a gradient tensor of the run's dtype and the state's shape. */
export function gradTensor(dtype: DType, shape: readonly number[], adj: ArrayLike<number>): Tensor {
  const data = alloc(dtype, adj.length);
  for (let i = 0; i < adj.length; i++) data[i] = adj[i]!;
  return new Tensor(dtype, [...shape], data);
}
