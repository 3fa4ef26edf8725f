/**
 * The judge's fast GDN2 pair (docs/spec/precision.md#fast-pair-gdn2): the reference pair of
 * src/rules/gdn2.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * GDN2: M̃_t = M_t diag(a_t), a_t = 1 − α_t per key channel; e_t = M̃_t (b_t ⊙ k_t) − w_t ⊙ v_t
 * (b = θ the erase gate, w = η the write gate, both per channel); M_{t+1} = M̃_t − e_t k_tᵀ;
 * y_t = M_{t+1} q_t. X = [k, v, q, α, θ, η]; S = e.
 */
function gdn2Loops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  function forward(X: Data[], M: Data, E: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, B = X[4]!, WR = X[5]!;
    const dd = d * d, A = new Float64Array(d), bk = accBuffer(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) A[j] = 1 - AL[o + j]!;
      // the gated key b ⊙ k, stored as the reference stores it (its accumulator's dtype)
      for (let j = 0; j < d; j++) bk[j] = B[o + j]! * K[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        // M̃_t's row (stored in place of M_{t+1}'s) and e_i = (M̃_t (b ⊙ k))_i − w_i v_i
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          M[mn + r + j] = A[j]! * M[mt + r + j]!;
          s = ACC32 ? fr(s + M[mn + r + j]! * bk[j]!) : s + M[mn + r + j]! * bk[j]!;
        }
        E[o + i] = s;
        E[o + i]! -= WR[o + i]! * V[o + i]!;
        // the write − e_i kᵀ (a zero term adds nothing) and y_i = (M_{t+1} q)_i
        const u = -1 * E[o + i]!;
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
    const K = X[0]!, AL = X[3]!;
    const dd = d * d, A = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) A[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        for (let j = 0; j < d; j++) M[mn + r + j] = A[j]! * M[mt + r + j]!;
        const u = -1 * E[o + i]!;
        if (u !== 0) for (let j = 0; j < d; j++) M[mn + r + j]! += u * K[o + j]!;
      }
    }
  }

  /**
   * Tokens t1 − 1 down to t0 (M holds M_{t0..t1} from 0); D holds ∂L/∂M_{t1} and ends as ∂L/∂M_{t0}.
   * G = [dk, dv, dq, dα, dθ, dη] in the storage dtype. One pass over the rows per token: D += dy qᵀ;
   * dq = M_{t+1}ᵀ dy; de_i = −(D k)_i (dv_i, dη_i from it); Dᵀe; M_tᵀ de; D += de (b ⊙ k)ᵀ; and the
   * decay's column sums dα_j = −Σ_i D_ij (M_t)_ij over the rows in the natural order (in the reversed
   * order a second pass), then D ← D diag(a).
   */
  function backward(X: Data[], E: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, B = X[4]!, WR = X[5]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!, dtheta = G[4]!, deta = G[5]!;
    const dd = d * d, A = new Float64Array(d);
    const accQ = accBuffer(d), accT = accBuffer(d), accK = accBuffer(d), col = accBuffer(d), bk = accBuffer(d), de = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) A[j] = 1 - AL[o + j]!;
      for (let j = 0; j < d; j++) bk[j] = B[o + j]! * K[o + j]!;
      accQ.fill(0);
      accT.fill(0);
      accK.fill(0);
      col.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, ei = E[o + i]!;
        // D += dy qᵀ ; dq = M_{t+1}ᵀ dy ; (D k)_i
        let sk = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          if (dyi !== 0) {
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
          }
          sk = ACC32 ? fr(sk + D[r + j]! * K[o + j]!) : sk + D[r + j]! * K[o + j]!;
        }
        de[i] = sk;
        dv[o + i] = WR[o + i]! * de[i]!;
        deta[o + i] = V[o + i]! * de[i]!;
        de[i] = -de[i]!;
        const dei = de[i]!;
        // Dᵀe ; M_tᵀ de ; D += de (b ⊙ k)ᵀ ; the decay's column sums and the decay (natural order)
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          if (ei !== 0) accT[j] = ACC32 ? fr(accT[j]! + D[r + j]! * ei) : accT[j]! + D[r + j]! * ei;
          if (dei !== 0) {
            accK[j] = ACC32 ? fr(accK[j]! + M[mt + r + j]! * dei) : accK[j]! + M[mt + r + j]! * dei;
            D[r + j]! += dei * bk[j]!;
          }
          if (!REV) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= A[j]!;
          }
        }
      }
      if (REV) {
        for (let i = 0; i < d; i++) {
          const r = i * d;
          for (let j = 0; j < d; j++) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= A[j]!;
          }
        }
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]!;
      for (let j = 0; j < d; j++) dk[o + j] = -accT[j]!;
      for (let j = 0; j < d; j++) {
        const g = A[j]! * accK[j]!;
        dk[o + j]! += B[o + j]! * g;
        dtheta[o + j] = K[o + j]! * g;
      }
      for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const GDN2_FORM: FastForm = {
  name: "gdn2", loops: gdn2Loops, inputs: ["k", "v", "q", "alpha", "theta", "eta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"], ["dtheta", "row"], ["deta", "row"]],
};
