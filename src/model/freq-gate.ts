/**
 * The learned frequency gate (docs/spec/titans-family.md#learned-gate with docs/spec/decisions.md#d10), built from tape ops so
 * that the tape derives its surrogate gradient:
 *   m̄ = (1/s) Σ_t X[t] ;  g_l = sigmoid(b_freq_l + w_freq_l · m̄) ;  active_l = l == 0 || g_l > threshold
 * Every level's output enters the sum with a multiplier whose VALUE is exactly 1 (the forward is
 * the hard decision only: inactive levels still contribute their frozen read, §9.3) and whose
 * VJP passes straight through to g_l, so dg_l = <dy_combined after the 1/sqrt(k) scale, y_l> with
 * its true sign (D10), dp_l = dg_l g_l (1 − g_l), and dX[t] gains (Σ_l dp_l w_freq_l)/s.
 */
import { add, matmul, outerProduct, scale, sigmoid, straightThroughBool } from "../ops/index.ts";
import { Tensor, alloc } from "../tensor.ts";
import type { TensorRecord } from "./params.ts";

export interface GateForward {
  /** g_l per level (a plain number: the decision reads it, nothing differentiates the number). */
  readonly values: readonly number[];
  readonly active: readonly boolean[];
  /** [s, d] tensors of ones, one per level, carrying the straight-through path to g_l. */
  readonly multipliers: readonly Tensor[];
}

/** A tensor filled with `v`. It is never registered on a tape, so ops treat it as a constant. */
function constant(like: Tensor, shape: number[], v: number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return new Tensor(like.dtype, shape, alloc(like.dtype, n).fill(v));
}

export function freqGate(X: Tensor, levels: readonly TensorRecord[], threshold: number): GateForward {
  const [s, d] = X.shape as [number, number];
  // m̄ = (1/s) · (1ᵀ X): a [1, d] row.
  const mean = scale([matmul([constant(X, [1, s], 1), X], {})], { c: 1 / s });
  const one = constant(X, [1], 1);
  const values: number[] = [], active: boolean[] = [], multipliers: Tensor[] = [];
  levels.forEach((p, l) => {
    // outer(·, [1]) turns the [d] and [1] parameters into [d, 1] and [1, 1] (exact: x·1 = x).
    const pre = add([matmul([mean, outerProduct([p.w_freq!, one], {})], {}), outerProduct([p.b_freq!, one], {})], {});
    const g = sigmoid([pre], {});
    const hard = straightThroughBool([g], { threshold });
    values.push(g.data[0]!);
    active.push(l === 0 || hard.data[0] === 1);
    // hard + (1 − hard) with the second term a constant: value exactly 1, VJP the identity to hard.
    const unit = add([hard, constant(X, [1, 1], 1 - hard.data[0]!)], {});
    multipliers.push(matmul([constant(X, [s, 1], 1), matmul([unit, constant(X, [1, d], 1)], {})], {}));
  });
  return { values, active, multipliers };
}
