/**
 * The judge's fast Comba pair (docs/spec/precision.md#fast-pair-new-rules): the reference pair of
 * src/rules/comba.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean;

/**
 * Comba: e_t = M_t p_t − v_t (the undecayed memory, read with p); M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ;
 * y_t = M_{t+1} q_t. X = [k, v, q, p, α, θ]; S = e.
 */
function combaLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  function forward(X: Data[], M: Data, E: Data, Y: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, P = X[3]!, AL = X[4]!, TH = X[5]!;
    const dd = d * d;
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, c = -TH[t]!, decay = 1 - AL[t]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        // e_i = (M_t p)_i − v_i, and M_t's row decayed into M_{t+1}'s
        let s = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj;
          s = ACC32 ? fr(s + M[mt + r + j]! * P[o + j]!) : s + M[mt + r + j]! * P[o + j]!;
          M[mn + r + j] = decay * M[mt + r + j]!;
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

  function replay(X: Data[], E: Data, M: Data, d: number, t0: number, t1: number): void {
    const K = X[0]!, AL = X[4]!, TH = X[5]!;
    const dd = d * d;
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, c = -TH[t]!, decay = 1 - AL[t]!;
      for (let i = 0; i < d; i++) {
        const r = i * d;
        for (let j = 0; j < d; j++) M[mn + r + j] = decay * M[mt + r + j]!;
        const u = c * E[o + i]!;
        if (u !== 0) for (let j = 0; j < d; j++) M[mn + r + j]! += u * K[o + j]!;
      }
    }
  }

  /** G = [dk, dv, dq, dp, dα, dθ]. */
  function backward(X: Data[], E: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[]): void {
    const K = X[0]!, Q = X[2]!, P = X[3]!, AL = X[4]!, TH = X[5]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dp = G[3]!, dalpha = G[4]!, dtheta = G[5]!;
    const dd = d * d;
    const de = accBuffer(d), accQ = accBuffer(d), accT = accBuffer(d), accP = accBuffer(d);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, o = t * d, nth = -TH[t]!, decay = 1 - AL[t]!;
      accQ.fill(0);
      accT.fill(0);
      accP.fill(0);
      let fro = 0, sth = 0;
      for (let ii = 0; ii < d; ii++) {
        const i = REV ? d - 1 - ii : ii, r = i * d;
        const dyi = DY[o + i]!, ei = E[o + i]!;
        // one loop over the row: D += dy qᵀ ; dq = M_{t+1}ᵀ dy ; dα = −⟨D, M_t⟩ (one sum over the
        // entries in order) ; de_i = (D k)_i ; Dᵀe
        let sk = 0;
        if (dyi !== 0 && ei !== 0) {
          // the usual case, without the zero tests (the same operations as the loop below)
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj;
            D[r + j]! += dyi * Q[o + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r + j]! * dyi) : accQ[j]! + M[mn + r + j]! * dyi;
            const Dj = D[r + j]!;
            fro = ACC32 ? fr(fro + Dj * M[mt + r + j]!) : fro + Dj * M[mt + r + j]!;
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
            fro = ACC32 ? fr(fro + Dj * M[mt + r + j]!) : fro + Dj * M[mt + r + j]!;
            sk = ACC32 ? fr(sk + Dj * K[o + j]!) : sk + Dj * K[o + j]!;
            if (ei !== 0) accT[j] = ACC32 ? fr(accT[j]! + Dj * ei) : accT[j]! + Dj * ei;
          }
        }
        // dθ = −eᵀ D k
        de[i] = sk;
        sth = ACC32 ? fr(sth + ei * de[i]!) : sth + ei * de[i]!;
        de[i]! *= nth;
        const dei = de[i]!;
        // dp = M_tᵀ de ; D ← (1 − α) D + de pᵀ
        if (dei !== 0) {
          for (let j = 0; j < d; j++) {
            accP[j] = ACC32 ? fr(accP[j]! + M[mt + r + j]! * dei) : accP[j]! + M[mt + r + j]! * dei;
            D[r + j]! *= decay;
            D[r + j]! += dei * P[o + j]!;
          }
        } else for (let j = 0; j < d; j++) D[r + j]! *= decay;
      }
      for (let j = 0; j < d; j++) dq[o + j] = accQ[j]!;
      dalpha[t] = -fro;
      dtheta[t] = -sth;
      for (let j = 0; j < d; j++) dk[o + j] = nth * accT[j]!;
      for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
      for (let j = 0; j < d; j++) dp[o + j] = accP[j]!;
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const COMBA_FORM: FastForm = {
  name: "comba", loops: combaLoops, inputs: ["k", "v", "q", "p", "alpha", "theta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dp", "row"], ["dalpha", "token"], ["dtheta", "token"]],
};
