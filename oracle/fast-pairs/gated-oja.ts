/**
 * The judge's fast gated Oja pair (docs/spec/precision.md#fast-pair-gdn2): the reference pair of
 * src/rules/gated_oja.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * Gated Oja: M̃_t = diag(a_t) M_t, a_t = 1 − α_t per value channel (a row of M);
 * ε_t = M̃_tᵀ v_t − k_t; M_{t+1} = M̃_t − θ_t v_t ε_tᵀ; y_t = M_{t+1} q_t. X = [k, v, q, α, θ]; S = ε.
 * The error is a column read (a sum over the rows), so each token takes two passes over the rows
 * forward (the decay and the read, then the write and y) and two backward.
 */
function gatedOjaLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  function forward(X: Data[], M: Data, E: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d, accE = accBuffer(d), C = accBuffer(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, th = TH[t]!;
      // M̃_t's rows (in place of M_{t+1}'s) and ε = M̃_tᵀ v over the rows in the sum's order
      accE.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d, a = 1 - AL[o + i]!, vi = V[o + i]!;
        for (let j = 0; j < d; j++) M[mn + r + j] = a * M[mt + r + j]!;
        if (vi !== 0) for (let j = 0; j < d; j++) accE[j] = ACC32 ? fr(accE[j]! + M[mn + r + j]! * vi) : accE[j]! + M[mn + r + j]! * vi;
      }
      for (let j = 0; j < d; j++) E[o + j] = accE[j]!;
      for (let j = 0; j < d; j++) E[o + j]! -= K[o + j]!;
      for (let j = 0; j < d; j++) C[j] = -th * E[o + j]!;
      // the write v (−θ ε)ᵀ and y_i = (M_{t+1} q)_i
      for (let i = 0; i < d; i++) {
        const r = i * d, vi = V[o + i]!;
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          M[mn + r + j]! += C[j]! * vi;
          s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
        }
        Y[o + i] = s;
      }
    }
  }

  /** M_{t0+1..t1} again from M_{t0} (at 0 in M) and the saved ε: the forward's write, operation for operation. */
  function replay(X: Data[], E: Data, M: Data, d: number, t0: number, t1: number): void {
    const V = X[1]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d, C = accBuffer(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, th = TH[t]!;
      for (let j = 0; j < d; j++) C[j] = -th * E[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d, a = 1 - AL[o + i]!, vi = V[o + i]!;
        for (let j = 0; j < d; j++) M[mn + r + j] = a * M[mt + r + j]!;
        for (let j = 0; j < d; j++) M[mn + r + j]! += C[j]! * vi;
      }
    }
  }

  /**
   * Tokens t1 − 1 down to t0 (M holds M_{t0..t1} from 0); D holds ∂L/∂M_{t1} and ends as ∂L/∂M_{t0}.
   * G = [dk, dv, dq, dα, dθ] in the storage dtype. Pass one over the rows (in the sum's order):
   * D += dy qᵀ, dq = M_{t+1}ᵀ dy, Dᵀv, (D ε)_i; then dθ = −εᵀ Dᵀv and de = −θ Dᵀv; pass two:
   * (M_t de)_i, D += v deᵀ, dα_i = −⟨D_i, (M_t)_i⟩ and the decay of row i.
   */
  function backward(X: Data[], E: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const V = X[1]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!, dtheta = G[4]!;
    const dd = d * d;
    const accQ = accBuffer(d), de = accBuffer(d), tmp = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, th = TH[t]!;
      accQ.fill(0);
      de.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, vi = V[o + i]!;
        let se = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          if (dyi !== 0) {
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
          }
          const Dj = D[r + j]!;
          if (vi !== 0) de[j] = ACC32 ? fr(de[j]! + Dj * vi) : de[j]! + Dj * vi;
          se = ACC32 ? fr(se + Dj * E[o + j]!) : se + Dj * E[o + j]!;
        }
        tmp[i] = se;
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]!;
      // dθ = −εᵀ (Dᵀ v) in the sum's order; de = −θ Dᵀ v; dv = −θ D ε; dk = −de
      let sth = 0;
      for (let jj = 0; jj < d; jj++) {
        const j = REV ? d - 1 - jj : jj;
        sth = ACC32 ? fr(sth + E[o + j]! * de[j]!) : sth + E[o + j]! * de[j]!;
      }
      dtheta[t] = -sth;
      for (let j = 0; j < d; j++) de[j]! *= -th;
      for (let i = 0; i < d; i++) dv[o + i] = -th * tmp[i]!;
      for (let j = 0; j < d; j++) dk[o + j] = -de[j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d, vi = V[o + i]!, a = 1 - AL[o + i]!;
        // (M_t de)_i, then D_i += v_i deᵀ and dα_i = −⟨D_i, (M_t)_i⟩, each in the sum's order
        let sm = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          sm = ACC32 ? fr(sm + M[mt + r + j]! * de[j]!) : sm + M[mt + r + j]! * de[j]!;
        }
        tmp[i] = sm;
        dv[o + i]! += a * tmp[i]!;
        let sa = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          D[r + j]! += de[j]! * vi;
          sa = ACC32 ? fr(sa + D[r + j]! * M[mt + r + j]!) : sa + D[r + j]! * M[mt + r + j]!;
          D[r + j]! *= a;
        }
        dalpha[o + i] = -sa;
      }
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const GATED_OJA_FORM: FastForm = {
  name: "gated_oja", loops: gatedOjaLoops, inputs: ["k", "v", "q", "alpha", "theta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"], ["dtheta", "token"]],
};
