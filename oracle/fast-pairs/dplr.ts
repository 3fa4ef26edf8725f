/**
 * The judge's fast DPLR pair (docs/spec/precision.md#fast-pair-new-rules): the reference pair of
 * src/rules/dplr.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * DPLR: u_t = M_t a_t (the undecayed memory); M_{t+1} = M_t diag(w_t) + u_t b_tᵀ + v_t k_tᵀ,
 * w_t = 1 − α_t per key channel; y_t = M_{t+1} q_t. X = [k, v, q, a, b, α]; S = u.
 */
function dplrLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  function forward(X: Data[], M: Data, U: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, A = X[3]!, B = X[4]!, AL = X[5]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        // u_i = (M_t a)_i, and M_t's row decayed into M_{t+1}'s
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          s = ACC32 ? fr(s + M[mt + r + j]! * A[o + j]!) : s + M[mt + r + j]! * A[o + j]!;
          M[mn + r + j] = W[j]! * M[mt + r + j]!;
        }
        U[o + i] = s;
        // the writes u_i bᵀ and v_i kᵀ (each in turn; a zero term adds nothing) and y_i = (M_{t+1} q)_i
        const ui = U[o + i]!, vi = V[o + i]!;
        s = 0;
        if (ui !== 0 && vi !== 0) {
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            M[mn + r + j]! += ui * B[o + j]!;
            M[mn + r + j]! += vi * K[o + j]!;
            s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
          }
        } else {
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            if (ui !== 0) M[mn + r + j]! += ui * B[o + j]!;
            if (vi !== 0) M[mn + r + j]! += vi * K[o + j]!;
            s = ACC32 ? fr(s + M[mn + r + j]! * Q[o + j]!) : s + M[mn + r + j]! * Q[o + j]!;
          }
        }
        Y[o + i] = s;
      }
    }
  }

  function replay(X: Data[], U: Data, M: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, B = X[4]!, AL = X[5]!;
    const dd = d * d, W = new Float64Array(d);
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        for (let j = 0; j < d; j++) M[mn + r + j] = W[j]! * M[mt + r + j]!;
        const ui = U[o + i]!, vi = V[o + i]!;
        if (ui !== 0) for (let j = 0; j < d; j++) M[mn + r + j]! += ui * B[o + j]!;
        if (vi !== 0) for (let j = 0; j < d; j++) M[mn + r + j]! += vi * K[o + j]!;
      }
    }
  }

  /** G = [dk, dv, dq, da, db, dα]. */
  function backward(X: Data[], U: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, A = X[3]!, B = X[4]!, AL = X[5]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, da = G[3]!, db = G[4]!, dalpha = G[5]!;
    const dd = d * d, W = new Float64Array(d);
    const du = accBuffer(d), accQ = accBuffer(d), accK = accBuffer(d), accB = accBuffer(d), accA = accBuffer(d), col = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d;
      for (let j = 0; j < d; j++) W[j] = 1 - AL[o + j]!;
      accQ.fill(0);
      accK.fill(0);
      accB.fill(0);
      accA.fill(0);
      col.fill(0);
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, vi = V[o + i]!, ui = U[o + i]!;
        // one loop over the row: D += dy qᵀ ; dq = M_{t+1}ᵀ dy ; the writes v kᵀ and u bᵀ:
        // dv_i = (D k)_i, du_i = (D b)_i, dk = Dᵀ v, db = Dᵀ u
        let sk = 0, sb = 0;
        if (dyi !== 0 && vi !== 0 && ui !== 0) {
          // the usual case, without the zero tests (the same operations as the loop below)
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
            const Dj = D[r + j]!;
            sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
            sb = ACC32 ? fr(sb + Dj * B[o + j]!) : sb + Dj * B[o + j]!;
            accK[j] = ACC32 ? fr(accK[j]! + Dj * vi) : accK[j]! + Dj * vi;
            accB[j] = ACC32 ? fr(accB[j]! + Dj * ui) : accB[j]! + Dj * ui;
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
            sb = ACC32 ? fr(sb + Dj * B[o + j]!) : sb + Dj * B[o + j]!;
            if (vi !== 0) accK[j] = ACC32 ? fr(accK[j]! + Dj * vi) : accK[j]! + Dj * vi;
            if (ui !== 0) accB[j] = ACC32 ? fr(accB[j]! + Dj * ui) : accB[j]! + Dj * ui;
          }
        }
        dv[o + i] = sk;
        du[i] = sb;
        // the read u = M_t a: da = M_tᵀ du ; the decay (dα_j = −Σ_i D_ij (M_t)_ij, rows in the natural
        // order; D ← D diag(w)), then D += du aᵀ
        const dui = du[i]!;
        if (!REV) {
          if (dui !== 0) {
            for (let j = 0; j < d; j++) {
              accA[j] = ACC32 ? fr(accA[j]! + M[mt + r + j]! * dui) : accA[j]! + M[mt + r + j]! * dui;
              col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
              D[r + j]! *= W[j]!;
              D[r + j]! += dui * A[o + j]!;
            }
          } else {
            for (let j = 0; j < d; j++) {
              col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
              D[r + j]! *= W[j]!;
            }
          }
        } else if (dui !== 0) {
          for (let j = 0; j < d; j++) accA[j] = ACC32 ? fr(accA[j]! + M[mt + r + j]! * dui) : accA[j]! + M[mt + r + j]! * dui;
        }
      }
      if (REV) {
        for (let i = 0; i < d; i++) {
          const r = i * d, dui = du[i]!;
          for (let j = 0; j < d; j++) {
            col[j] = ACC32 ? fr(col[j]! + D[r + j]! * M[mt + r + j]!) : col[j]! + D[r + j]! * M[mt + r + j]!;
            D[r + j]! *= W[j]!;
          }
          if (dui !== 0) for (let j = 0; j < d; j++) D[r + j]! += dui * A[o + j]!;
        }
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]!;
      for (let j = 0; j < d; j++) dk[o + j] = accK[j]!;
      for (let j = 0; j < d; j++) db[o + j] = accB[j]!;
      for (let j = 0; j < d; j++) da[o + j] = accA[j]!;
      for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const DPLR_FORM: FastForm = {
  name: "dplr", loops: dplrLoops, inputs: ["k", "v", "q", "a", "b", "alpha"], saved: "u",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["da", "row"], ["db", "row"], ["dalpha", "row"]],
};
