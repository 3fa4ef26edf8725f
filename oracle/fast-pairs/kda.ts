/**
 * The judge's fast KDA pair (docs/spec/precision.md#fast-pair-new-rules): the reference pair of
 * src/rules/kda.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * KDA: M̃_t = M_t diag(w_t), w_t = 1 − α_t per key channel; e_t = M̃_t k_t − v_t;
 * M_{t+1} = M̃_t − θ_t e_t k_tᵀ; y_t = M_{t+1} q_t. X = [k, v, q, α, θ]; S = e.
 */
function kdaLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  function forward(X: Data[], M: Data, E: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, c = -TH[t]!;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        // M̃_t's row (stored in place of M_{t+1}'s) and e_i = (M̃_t k)_i − v_i
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          M[mn + r + j] = W[j]! * M[mt + r + j]!;
          s = ACC32 ? fr(s + M[mn + r + j]! * K[o + j]!) : s + M[mn + r + j]! * K[o + j]!;
        }
        E[o + i] = s;
        E[o + i]! -= V[o + i]!;
        // the write − θ e_i kᵀ (a zero term adds nothing) and y_i = (M_{t+1} q)_i
        const u = c * E[o + i]!;
        s = 0;
        if (u !== 0) {
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            M[mn + r + j]! += u * K[o + j]!;
            s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
          }
        } else {
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
          }
        }
        Y[o + i] = s;
      }
    }
  }

  /** M_{t0+1..t1} again from M_{t0} (at 0 in M) and the saved e: the forward's write, operation for operation. */
  function replay(X: Data[], E: Data, M: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, c = -TH[t]!;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        for (let j = 0; j < d; j++) M[mn + r + j] = W[j]! * M[mt + r + j]!;
        const u = c * E[o + i]!;
        if (u !== 0) for (let j = 0; j < d; j++) M[mn + r + j]! += u * K[o + j]!;
      }
    }
  }

  /**
   * Tokens t1 − 1 down to t0 (M holds M_{t0..t1} from 0); D holds ∂L/∂M_{t1} and ends as ∂L/∂M_{t0}.
   * G = [dk, dv, dq, dα, dθ] in the storage dtype.
   */
  function backward(X: Data[], E: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!, dtheta = G[4]!;
    const dd = d * d, W = new Float64Array(d);
    const de = accBuffer(d), accQ = accBuffer(d), accT = accBuffer(d), accK = accBuffer(d), col = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, nth = -TH[t]!;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      accQ.fill(0);
      accT.fill(0);
      accK.fill(0);
      col.fill(0);
      let sth = 0;
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, ei = E[o + i]!;
        // one loop over the row: D += dy qᵀ ; dq = M_{t+1}ᵀ dy ; de_i = (D k)_i ; Dᵀe
        let sk = 0;
        if (dyi !== 0 && ei !== 0) {
          // the usual case, without the zero tests (the same operations as the loop below)
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
            const Dj = D[r + j]!;
            sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
            accT[j] = ACC32 ? fr(accT[j]! + Dj * ei) : accT[j]! + Dj * ei;
          }
        } else {
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            if (dyi !== 0) {
              D[r + j]! += dyi * Q[o + j]!;
              accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
            }
            const Dj = D[r + j]!;
            sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
            if (ei !== 0) accT[j] = ACC32 ? fr(accT[j]! + Dj * ei) : accT[j]! + Dj * ei;
          }
        }
        // dθ = −eᵀ D k
        de[i] = sk;
        sth = ACC32 ? fr(sth + ei * de[i]!) : sth + ei * de[i]!;
        de[i]! *= nth;
        const dei = de[i]!;
        // M_tᵀ de ; D += de kᵀ ; the decay: dα_j = −Σ_i D_ij (M_t)_ij (rows in the natural order), D ← D diag(w)
        for (let j = 0; j < d; j++) {
          if (dei !== 0) {
            accK[j] = ACC32 ? fr(accK[j]! + M[mt + r + j]! * dei) : accK[j]! + M[mt + r + j]! * dei;
            D[r + j]! += dei * K[o + j]!;
          }
          if (!REV) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= W[j]!;
          }
        }
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
      dtheta[t] = -sth;
      for (let j = 0; j < d; j++) dk[o + j] = nth * accT[j]!;
      for (let j = 0; j < d; j++) dk[o + j]! += W[j]! * accK[j]!;
      for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
      for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const KDA_FORM: FastForm = {
  name: "kda", loops: kdaLoops, inputs: ["k", "v", "q", "alpha", "theta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"], ["dtheta", "token"]],
};
