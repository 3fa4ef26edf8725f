/**
 * The judge's fast GLA pair (docs/spec/precision.md#fast-pair-linear): the reference pair of
 * src/rules/gla.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * GLA: M_{t+1} = M_t diag(a_t) + v_t k_tᵀ, a_t = 1 − α_t per key channel; y_t = M_{t+1} q_t.
 * X = [k, v, q, α]; nothing saved (the write needs no sum).
 */
function glaLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  function forward(X: Data[], M: Data, _S: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d, vi = V[o + i]!;
        // row i of M_{t+1} (elementwise: any order), and y_i = (M_{t+1} q)_i in the sum's order
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          M[mn + r + j] = W[j]! * M[mt + r + j]! + vi * K[o + j]!;
          s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
        }
        Y[o + i] = s;
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
   * G = [dk, dv, dq, dα] in the storage dtype. One pass over the rows per token: D += dy qᵀ;
   * dq = M_{t+1}ᵀ dy; dv = D k; dk = Dᵀ v; and the decay's column sums dα_j = −Σ_i D_ij (M_t)_ij,
   * which the reference sums over the rows in the natural order whatever the summation order (in the
   * reversed order they take a second pass, with the decay D ← D diag(a) after them).
   */
  function backward(X: Data[], _S: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!;
    const dd = d * d, W = new Float64Array(d);
    const accQ = accBuffer(d), accK = accBuffer(d), col = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      accQ.fill(0);
      accK.fill(0);
      col.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, vi = V[o + i]!;
        let sk = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          if (dyi !== 0) {
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
          }
          const Dj = D[r + j]!;
          sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
          if (vi !== 0) accK[j] = ACC32 ? fr(accK[j]! + Dj * vi) : accK[j]! + Dj * vi;
          if (!REV) {
            col[j] = ACC32 ? fr(col[j]! + Dj * M[mt + r + j]!) : col[j]! + Dj * M[mt + r + j]!;
            D[r + j] = Dj * W[j]!;
          }
        }
        dv[o + i] = sk;
      }
      if (REV) {
        for (let i = 0; i < d; i++) {
          const r = i * d;
          for (let j = 0; j < d; j++) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= W[j]!;
          }
        }
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]!;
      for (let j = 0; j < d; j++) dk[o + j] = accK[j]!;
      for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const GLA_FORM: FastForm = {
  name: "gla", loops: glaLoops, inputs: ["k", "v", "q", "alpha"],
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"]],
};
