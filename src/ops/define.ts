/**
 * One declarative record per tape op (in the manner of an OpInfo): its forward, its VJP, and
 * how the conformance suite samples valid inputs for it. `apply` is the only place where an
 * op meets the tape, so every op records the same way.
 */
import { activeTape } from "../tape.ts";
import type { Data, Tensor } from "../tensor.ts";

/** Value domain of a sampled input: real numbers, or strictly positive ones (e.g. KL priors). */
export type Domain = "real" | "positive";

/**
 * What an op's sampler may draw. The case generator supplies it (cases/ops.ts, from fast-check),
 * so the reference carries the sampling declaration without depending on a generator library.
 */
export interface Draw {
  int(min: number, max: number): number;
  real(min: number, max: number): number;
  bool(): boolean;
  /** `length` integers in [min, max]. */
  ints(length: number, min: number, max: number): number[];
  /** A shape of rank in [minRank, maxRank] with every extent in [1, maxDim]. */
  shape(minRank: number, maxRank: number, maxDim: number): number[];
}

export interface OpSample<A> {
  readonly shapes: number[][];
  readonly domains: Domain[];
  readonly attrs: A;
  /**
   * Inputs (by position) the output does not depend on under these attrs: their gradient must be
   * exactly zero, and there is nothing to difference (docs/spec/conformance.md#c0).
   */
  readonly constant?: readonly number[];
}

export interface OpDecl<A = unknown> {
  /** The TapeOp name of docs/spec/tape.md. */
  readonly name: string;
  readonly forward: (x: readonly Tensor[], attrs: A) => Tensor;
  readonly vjp: (x: readonly Tensor[], out: Tensor, dOut: Data, attrs: A) => (Data | null)[];
  /** Draws a valid case (shapes, value domains, attributes) for C0. */
  readonly sample: (g: Draw) => OpSample<A>;
  /**
   * Elementwise ops: the scalar function as a mathjs expression in x (the symbolic oracle);
   * other free symbols are the op's numeric attributes by name.
   */
  readonly symbolic?: string;
  /**
   * "fd": the VJP is the true derivative (checked by finite differences).
   * "surrogate": the VJP is a declared estimator, checked against `surrogateVjp`, not FD.
   */
  readonly oracle: "fd" | "surrogate";
  readonly surrogateVjp?: (x: readonly Tensor[], dOut: Data, attrs: A) => (Data | null)[];
}

const registry: OpDecl<any>[] = [];

export function defineOp<A>(decl: OpDecl<A>): (x: readonly Tensor[], attrs: A) => Tensor {
  registry.push(decl);
  return (x, attrs) => apply(decl, x, attrs);
}

export function allOps(): readonly OpDecl<any>[] {
  return registry;
}

/** Computes the op and, when a tape is active and an input is on it, records it. */
export function apply<A>(decl: OpDecl<A>, x: readonly Tensor[], attrs: A): Tensor {
  const out = decl.forward(x, attrs);
  const tape = activeTape();
  if (tape !== null && tape.anyTracked(x)) {
    tape.recordOp(decl.name, decl.vjp, x, out, attrs);
  }
  return out;
}
