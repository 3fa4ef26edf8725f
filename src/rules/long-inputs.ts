/**
 * Long-regime input shapers (RuleDecl.longInputs, docs/spec/conformance.md#long-inputs): for a rule
 * whose transition is not contractive for independently drawn unit vectors, the generated inner
 * inputs of a sequence are moved, token by token, just far enough that the transition's operator
 * norm is at most 1 − m_t/2, where m_t > 0 is the margin the token's gates leave. The derivations
 * are on the rules' sheets (docs/spec/titans-family.md#comba-long, #dplr-long).
 */
import { Tensor } from "../tensor.ts";
import type { InnerInputs, LongInputs } from "./types.ts";

/**
 * The unit vector within distance `rho` of the unit vector `target` (entries [to, to + d) of `tgt`,
 * times `sign`) that lies nearest to the unit vector x (entries [o, o + d) of `src`), written to
 * `out` at o: x itself when it is that close already, else target turned toward x by the angle
 * 2 asin(rho / 2) (the chord of length rho), in the plane of the two.
 */
export function pullToward(src: ArrayLike<number>, tgt: ArrayLike<number>, sign: number, o: number, d: number, rho: number, out: Float64Array | Float32Array): void {
  let dist2 = 0, dot = 0;
  for (let i = 0; i < d; i++) {
    const x = src[o + i]!, t = sign * tgt[o + i]!;
    dist2 += (x - t) ** 2;
    dot += x * t;
  }
  if (Math.sqrt(dist2) <= rho) {
    for (let i = 0; i < d; i++) out[o + i] = src[o + i]!;
    return;
  }
  // w: the part of x orthogonal to the target, normalised (none at d = 1 or x = −target: stay on target)
  const w = new Float64Array(d);
  let wn = 0;
  for (let i = 0; i < d; i++) {
    w[i] = src[o + i]! - dot * sign * tgt[o + i]!;
    wn += w[i]! ** 2;
  }
  wn = Math.sqrt(wn);
  if (wn <= 1e-12) {
    for (let i = 0; i < d; i++) out[o + i] = sign * tgt[o + i]!;
    return;
  }
  const phi = 2 * Math.asin(Math.min(1, rho / 2));
  const c = Math.cos(phi), s = Math.sin(phi) / wn;
  for (let i = 0; i < d; i++) out[o + i] = c * sign * tgt[o + i]! + s * w[i]!;
}

/**
 * Comba's margin at a token: its transition (1 − α) I − θ p kᵀ is, at p = k (unit), symmetric with
 * eigenvalues 1 − α (across k) and 1 − α − θ (along k), so norm max(1 − α, |1 − α − θ|) = 1 − m.
 */
export function combaMargin(alpha: number, theta: number): number {
  return 1 - Math.max(1 - alpha, Math.abs(1 - alpha - theta));
}

/**
 * DPLR's margin at a token: at b = −a (unit) its transition diag(w) − a aᵀ is symmetric with
 * eigenvalues in [min w − 1, max w] (w = 1 − α per key channel, in (0, 1)), so norm at most
 * max(max w, 1 − min w) = 1 − m, m = min(min α, 1 − max α).
 */
export function dplrMargin(alpha: ArrayLike<number>, o: number, d: number): number {
  let lo = Infinity, hi = -Infinity;
  for (let j = 0; j < d; j++) {
    lo = Math.min(lo, alpha[o + j]!);
    hi = Math.max(hi, alpha[o + j]!);
  }
  return Math.min(lo, 1 - hi);
}

/**
 * Comba: p_t pulled toward k_t until ‖p_t − k_t‖ ≤ m_t / (2 θ_t). With p = k + δ the transition is
 * (1 − α) I − θ k kᵀ − θ δ kᵀ, of norm at most (1 − m) + θ ‖δ‖ ≤ 1 − m/2. A token whose gates leave no
 * margin (m ≤ 0, θ > 2 − α) gets p = k: what remains is Delta's own transition there.
 */
export const combaLongInputs: LongInputs = {
  contract: "p_t within m_t / (2 θ_t) of k_t, m_t = 1 − max(1 − α_t, |1 − α_t − θ_t|): transition norm ≤ 1 − m_t / 2",
  shape(inp: InnerInputs, cfg): InnerInputs {
    const { d, seq_len: s } = cfg;
    const p = inp.p!, out = new Tensor(p.dtype, [...p.shape]);
    for (let t = 0; t < s; t++) {
      const a = inp.alpha!.data[t]!, th = inp.theta!.data[t]!;
      const m = combaMargin(a, th);
      const rho = th > 0 ? Math.max(0, m) / (2 * th) : Infinity;
      pullToward(p.data, inp.k.data, 1, t * d, d, rho, out.data);
    }
    return { ...inp, p: out };
  },
};

/**
 * DPLR: b_t pulled toward −a_t until ‖b_t + a_t‖ ≤ m_t / 2 (RWKV-7's own form is b = −a scaled). With
 * b = −a + δ the transition is diag(w) − a aᵀ + a δᵀ, of norm at most (1 − m) + ‖δ‖ ≤ 1 − m/2.
 */
export const dplrLongInputs: LongInputs = {
  contract: "b_t within m_t / 2 of −a_t, m_t = min(min_j α_tj, 1 − max_j α_tj): transition norm ≤ 1 − m_t / 2",
  shape(inp: InnerInputs, cfg): InnerInputs {
    const { d, seq_len: s } = cfg;
    const b = inp.b!, out = new Tensor(b.dtype, [...b.shape]);
    for (let t = 0; t < s; t++) {
      const m = dplrMargin(inp.alpha!.data, t * d, d);
      pullToward(b.data, inp.a!.data, -1, t * d, d, Math.max(0, m) / 2, out.data);
    }
    return { ...inp, b: out };
  },
};
