/**
 * The judge's fast RWKV-6 pair (docs/spec/precision.md#fast-pair-linear): the reference pair of
 * src/rules/rwkv6.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * RWKV-6: y_t = M_t q_t + v_t b_t with the bonus b_t = Σ_j u_t[j] k_t[j] q_t[j] (u_t = θ_t);
 * M_{t+1} = M_t diag(a_t) + v_t k_tᵀ, a_t = 1 − α_t per key channel. X = [k, v, q, α, θ]; nothing
 * saved (the write needs no sum). The bonus is an inline sum of the reference (f64, natural order).
 */
function rwkv6Loops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  function forward(X: Data[], M: Data, _S: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, U = X[4]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      let b = 0;
      for (let j = 0; j < d; j++) b += U[o + j]! * K[o + j]! * Q[o + j]!;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d, vi = V[o + i]!;
        // y_i = (M_t q)_i in the sum's order, row i of M_{t+1} beside it (elementwise: any order)
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          s = ACC32 ? fr(s + M[mt + r + j]! * Q[o + j]!) : s + M[mt + r + j]! * Q[o + j]!;
          M[mn + r + j] = W[j]! * M[mt + r + j]! + vi * K[o + j]!;
        }
        Y[o + i] = s;
        Y[o + i] = Y[o + i]! + b * vi;
      }
    }
  }

  /** M_{t0+1..t1} again from M_{t0} (at 0 in M): the forward's write, operation for operation. */
  function replay(X: Data[], _S: Data, M: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, AL = X[3]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d, vi = V[o + i]!;
        for (let j = 0; j < d; j++) M[mn + r + j] = W[j]! * M[mt + r + j]! + vi * K[o + j]!;
      }
    }
  }

  /**
   * Tokens t1 − 1 down to t0 (M holds M_{t0..t1} from 0); D holds ∂L/∂M_{t1} and ends as ∂L/∂M_{t0}.
   * G = [dk, dv, dq, dα, dθ] in the storage dtype. One pass over the rows per token: dv = D k + b dy,
   * dk = Dᵀ v + c u ⊙ q, dq = M_tᵀ dy + c u ⊙ k (c = dyᵀ v), then D ← D diag(a) + dy qᵀ; the decay's
   * column sums dα_j = −Σ_i D_ij (M_t)_ij run over the rows in the natural order whatever the
   * summation order (in the reversed order a second pass, with the decay and dy qᵀ after them).
   */
  function backward(X: Data[], _S: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, U = X[4]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!, dtheta = G[4]!;
    const dd = d * d, W = new Float64Array(d);
    const gv = accBuffer(d), accK = accBuffer(d), accQ = accBuffer(d), col = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      // c = dyᵀ v in the sum's order; the bonus b as the forward sums it
      let c = 0;
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii;
        c = ACC32 ? fr(c + DY[o + i]! * V[o + i]!) : c + DY[o + i]! * V[o + i]!;
      }
      let b = 0;
      for (let j = 0; j < d; j++) b += U[o + j]! * K[o + j]! * Q[o + j]!;
      accK.fill(0);
      accQ.fill(0);
      col.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, vi = V[o + i]!;
        let sk = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          const Dj = D[r + j]!;
          sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
          if (vi !== 0) accK[j] = ACC32 ? fr(accK[j]! + Dj * vi) : accK[j]! + Dj * vi;
          if (dyi !== 0) accQ[j] = ACC32 ? fr(accQ[j]! + M[mt + r + j]! * dyi) : accQ[j]! + M[mt + r + j]! * dyi;
          if (!REV) {
            col[j] = ACC32 ? fr(col[j]! + Dj * M[mt + r + j]!) : col[j]! + Dj * M[mt + r + j]!;
            D[r + j] = Dj * W[j]!;
            if (dyi !== 0) D[r + j]! += dyi * Q[o + j]!;
          }
        }
        gv[i] = sk;
      }
      if (REV) {
        for (let i = 0; i < d; i++) {
          const r = i * d, dyi = DY[o + i]!;
          for (let j = 0; j < d; j++) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= W[j]!;
            if (dyi !== 0) D[r + j]! += dyi * Q[o + j]!;
          }
        }
      }
      for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
      for (let i = 0; i < d; i++) dv[o + i] = gv[i]! + b * DY[o + i]!;
      for (let j = 0; j < d; j++) {
        dk[o + j] = accK[j]! + c * U[o + j]! * Q[o + j]!;
        dtheta[o + j] = c * K[o + j]! * Q[o + j]!;
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]! + c * U[o + j]! * K[o + j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const RWKV6_FORM: FastForm = {
  name: "rwkv6", loops: rwkv6Loops, inputs: ["k", "v", "q", "alpha", "theta"],
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"], ["dtheta", "row"]],
};
