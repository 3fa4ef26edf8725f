/**
 * The two ends of a state adjoint (docs/spec/state-gradients.md): a backward loop starts its
 * f64 adjoint of the final state from the caller's dFinal (absent = zero) and hands back what the
 * adjoint holds after token 0 as the initial state's gradient, in the run's dtype. Also the
 * names under which the state travels on the tape.
 */
import { Tensor, alloc, type DType } from "../tensor.ts";
import type { RuleConfig, RuleDecl, State } from "./types.ts";

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

// ── names of the state on the tape (docs/spec/state-gradients.md#tape) ──────

/** The rule's state names (stateShapes' keys; derived names such as Moneta's A1/A2 are not state). */
export function stateNames(decl: RuleDecl): string[] {
  // The names do not depend on the sizes: any configuration with the defaults will do.
  const cfg: Record<string, number | string> = { d: 1, seq_len: 1 };
  for (const [name, spec] of Object.entries(decl.hyper)) cfg[name] = spec.default;
  return Object.keys(decl.stateShapes(cfg as RuleConfig));
}

/** The state entries a frozen read reads: the state names its pair saves (it saves what it reads). */
export function frozenStateNames(decl: RuleDecl): string[] {
  const saved = decl.frozen?.saved ?? [];
  return stateNames(decl).filter((n) => saved.includes(n));
}

/** Opaque input name of an initial state entry, and output name of a final one. */
export function initialStateName(n: string): string {
  return `state0.${n}`;
}
export function finalStateName(n: string): string {
  return `stateFinal.${n}`;
}

/** Key of the block recorded when the state is on the tape: `<rule>+state`, `<rule>.frozen+state`. */
export function stateBlockKey(key: string): string {
  return `${key}+state`;
}
