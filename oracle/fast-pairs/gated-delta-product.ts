/**
 * The judge's fast Gated DeltaProduct pair (docs/spec/precision.md#fast-pair-gdp): the reference
 * pair of src/rules/gated_delta_product.ts as fused row loops, run by oracle/fast-pairs/skeleton.ts.
 */
import { householderSteps } from "../../src/rules/gated_delta_product.ts";
import type { FastForm } from "./skeleton.ts";
import type { Data } from "../../src/tensor.ts";

// Placeholders that only the compiled copies define (oracle/fast-pairs/skeleton.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean, MODE_EVEN: boolean;

/**
 * Gated DeltaProduct (src/rules/gated_delta_product.ts): P_0 = (1 − α_t) M_t; per step h < n_h
 * e_{t,h} = P_h k_{t,h} − v_{t,h}, P_{h+1} = P_h − θ_{t,h} e_{t,h} k_{t,h}ᵀ; M_{t+1} = P_{n_h};
 * y_t = M_{t+1} q_t. X = [k, v, q, α, θ], step h of token t at row t·n_h + h of k, v, θ; S = e
 * ([s, n_h·d]). Every step of a row needs only that row, so a token is one pass over the rows; the
 * replay keeps P_1 … P_{n_h−1} of a segment's tokens as the forward wrote them, for the backward.
 */
function gdpLoops() {
  const ACC32 = MODE_ACC32, REV = MODE_REV, EVEN = MODE_EVEN;
  const fr = Math.fround;
  const accBuffer = (n: number) => (ACC32 ? new Float32Array(n) : new Float64Array(n));

  /**
   * Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². Rows in pairs
   * (two sum chains side by side; `two` false for the last row of an odd d), one loop per step: the
   * decay with step 0's read, then each step's write with the next step's read (the last one's with y's).
   */
  function forward(X: Data[], M: Data, E: Data, Y: Data, d: number, t0: number, t1: number, nh: number): void {
    const K = X[0]!, V = X[1]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d;
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, oq = t * d, decay = 1 - AL[t]!;
      for (let i = 0; i < d; i += 2) {
        const two = EVEN || i + 1 < d, r0 = i * d, r1 = r0 + d;
        // P_0's rows (stored in place of M_{t+1}'s) and (P_0 k_0)_i
        let o = t * nh * d, s0 = 0, s1 = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj, kj = K[o + j]!;
          M[mn + r0 + j] = decay * M[mt + r0 + j]!;
          s0 = ACC32 ? fr(s0 + M[mn + r0 + j]! * kj) : s0 + M[mn + r0 + j]! * kj;
          if (two) {
            M[mn + r1 + j] = decay * M[mt + r1 + j]!;
            s1 = ACC32 ? fr(s1 + M[mn + r1 + j]! * kj) : s1 + M[mn + r1 + j]! * kj;
          }
        }
        for (let h = 0; h < nh; h++) {
          // e_i = (P_h k_h)_i − v_i; the write − θ e_i k_hᵀ (a zero term adds nothing) and the next read
          const row = t * nh + h;
          E[o + i] = s0;
          E[o + i]! -= V[o + i]!;
          const u0 = -TH[row]! * E[o + i]!;
          let u1 = 0;
          if (two) {
            E[o + i + 1] = s1;
            E[o + i + 1]! -= V[o + i + 1]!;
            u1 = -TH[row]! * E[o + i + 1]!;
          }
          const last = h === nh - 1, X2 = last ? Q : K, o2 = last ? oq : o + d;
          s0 = 0;
          s1 = 0;
          for (let jj = 0; jj < d; jj++) {
            const j = REV ? d - 1 - jj : jj, kj = K[o + j]!, xj = X2[o2 + j]!;
            if (u0 !== 0) M[mn + r0 + j]! += u0 * kj;
            s0 = ACC32 ? fr(s0 + M[mn + r0 + j]! * xj) : s0 + M[mn + r0 + j]! * xj;
            if (two) {
              if (u1 !== 0) M[mn + r1 + j]! += u1 * kj;
              s1 = ACC32 ? fr(s1 + M[mn + r1 + j]! * xj) : s1 + M[mn + r1 + j]! * xj;
            }
          }
          o += d;
        }
        // y_i = (M_{t+1} q)_i
        Y[oq + i] = s0;
        if (two) Y[oq + i + 1] = s1;
      }
    }
  }

  /**
   * The states M_{t0+1..t1} again from M_{t0} and the saved errors: the forward's writes. The states
   * between the steps, P_1 … P_{n_h−1} of token t, are copied into PS at ((t − t0)·(n_h − 1) + h − 1)·d²
   * for the backward (the same values: the same operations on the same dtype).
   */
  function replay(X: Data[], E: Data, M: Data, d: number, t0: number, t1: number, nh: number, PS: Data): void {
    const K = X[0]!, AL = X[3]!, TH = X[4]!;
    const dd = d * d;
    for (let t = t0; t < t1; t++) {
      const mt = (t - t0) * dd, mn = mt + dd, decay = 1 - AL[t]!;
      for (let i = 0; i < dd; i++) M[mn + i] = decay * M[mt + i]!;
      for (let h = 0; h < nh; h++) {
        const row = t * nh + h, o = row * d;
        for (let i = 0; i < d; i++) {
          const u = -TH[row]! * E[o + i]!, r = mn + i * d;
          if (u !== 0) for (let j = 0; j < d; j++) M[r + j]! += u * K[o + j]!;
        }
        if (h < nh - 1) PS.set(M.subarray(mn, mn + dd), ((t - t0) * (nh - 1) + h) * dd);
      }
    }
  }

  /**
   * The backward of tokens t1 − 1 down to t0 (M holds M_{t0..t1} from 0); D is ∂L/∂M_{t+1} (an
   * accBuffer) and ends as ∂L/∂M_{t0}. G = [dk, dv, dq, dα, dθ]. Rows in pairs in the pass's order
   * (reversed sums: last row first; every column sum takes the first row's term, then the
   * second's): one loop for D += dy qᵀ, dq and the last step's reads de_i = (D k)_i and Dᵀe, then one
   * per step h, last first: its P_hᵀ de and D += de k_hᵀ with the reads of step h − 1; after step 0,
   * dα = −⟨D, M_t⟩ (the first row's terms, then the second's) and D ← (1 − α) D.
   */
  function backward(X: Data[], E: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[], nh: number, PS: Data): void {
    const K = X[0]!, Q = X[2]!, AL = X[3]!, TH = X[4]!;
    const dk = G[0]!, dv = G[1]!, dq = G[2]!, dalpha = G[3]!, dtheta = G[4]!;
    const dd = d * d;
    // de and the column sums in the buffers the reference uses (f32 under f32 sums)
    const de = accBuffer(nh * d), accQ = accBuffer(d), accT = accBuffer(nh * d), accK = accBuffer(nh * d), sth = accBuffer(nh);
    for (let t = t1 - 1; t >= t0; t--) {
      const mt = (t - t0) * dd, mn = mt + dd, oq = t * d, decay = 1 - AL[t]!;
      accQ.fill(0);
      accT.fill(0);
      accK.fill(0);
      sth.fill(0);
      let fro = 0;
      for (let ii = 0; ii < d; ii += 2) {
        const two = EVEN || ii + 1 < d;
        const i0 = REV ? d - 1 - ii : ii, i1 = REV ? i0 - 1 : i0 + 1, r0 = i0 * d, r1 = i1 * d;
        // D += dy qᵀ and dq = M_{t+1}ᵀ dy (a zero dy_i adds nothing), with the last step's reads
        const dy0 = DY[oq + i0]!, dy1 = two ? DY[oq + i1]! : 0;
        let o = (t * nh + nh - 1) * d, p = (nh - 1) * d, e0 = E[o + i0]!, e1 = two ? E[o + i1]! : 0, sk0 = 0, sk1 = 0;
        for (let jj = 0; jj < d; jj++) {
          const j = REV ? d - 1 - jj : jj, kj = K[o + j]!;
          if (dy0 !== 0) {
            D[r0 + j]! += dy0 * Q[oq + j]!;
            accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r0 + j]! * dy0) : accQ[j]! + M[mn + r0 + j]! * dy0;
          }
          const D0 = D[r0 + j]!;
          sk0 = ACC32 ? fr(sk0 + D0 * kj) : sk0 + D0 * kj;
          if (e0 !== 0) accT[p + j] = ACC32 ? fr(accT[p + j]! + D0 * e0) : accT[p + j]! + D0 * e0;
          if (two) {
            if (dy1 !== 0) {
              D[r1 + j]! += dy1 * Q[oq + j]!;
              accQ[j] = ACC32 ? fr(accQ[j]! + M[mn + r1 + j]! * dy1) : accQ[j]! + M[mn + r1 + j]! * dy1;
            }
            const D1 = D[r1 + j]!;
            sk1 = ACC32 ? fr(sk1 + D1 * kj) : sk1 + D1 * kj;
            if (e1 !== 0) accT[p + j] = ACC32 ? fr(accT[p + j]! + D1 * e1) : accT[p + j]! + D1 * e1;
          }
        }
        for (let h = nh - 1; h >= 0; h--) {
          const row = t * nh + h, th = TH[row]!;
          // de_i; dθ = −eᵀ D k, summed over the rows in this pass's order
          de[p + i0] = sk0;
          sth[h] = ACC32 ? fr(sth[h]! + e0 * de[p + i0]!) : sth[h]! + e0 * de[p + i0]!;
          de[p + i0]! *= -th;
          const de0 = de[p + i0]!;
          let de1 = 0;
          if (two) {
            de[p + i1] = sk1;
            sth[h] = ACC32 ? fr(sth[h]! + e1 * de[p + i1]!) : sth[h]! + e1 * de[p + i1]!;
            de[p + i1]! *= -th;
            de1 = de[p + i1]!;
          }
          if (h > 0) {
            // P_hᵀ de ; D += de k_hᵀ ; then step h − 1's reads
            const o2 = o - d, p2 = p - d, f0 = E[o2 + i0]!, f1 = two ? E[o2 + i1]! : 0;
            // rows i0 and i1 of P_h, as the replay kept them
            const b0 = ((t - t0) * (nh - 1) + h - 1) * dd + r0, b1 = b0 - r0 + r1;
            sk0 = 0;
            sk1 = 0;
            for (let jj = 0; jj < d; jj++) {
              const j = REV ? d - 1 - jj : jj, kj = K[o + j]!, kj2 = K[o2 + j]!;
              if (de0 !== 0) {
                accK[p + j] = ACC32 ? fr(accK[p + j]! + PS[b0 + j]! * de0) : accK[p + j]! + PS[b0 + j]! * de0;
                D[r0 + j]! += de0 * kj;
              }
              if (two && de1 !== 0) {
                accK[p + j] = ACC32 ? fr(accK[p + j]! + PS[b1 + j]! * de1) : accK[p + j]! + PS[b1 + j]! * de1;
                D[r1 + j]! += de1 * kj;
              }
              const D0 = D[r0 + j]!;
              sk0 = ACC32 ? fr(sk0 + D0 * kj2) : sk0 + D0 * kj2;
              if (f0 !== 0) accT[p2 + j] = ACC32 ? fr(accT[p2 + j]! + D0 * f0) : accT[p2 + j]! + D0 * f0;
              if (two) {
                const D1 = D[r1 + j]!;
                sk1 = ACC32 ? fr(sk1 + D1 * kj2) : sk1 + D1 * kj2;
                if (f1 !== 0) accT[p2 + j] = ACC32 ? fr(accT[p2 + j]! + D1 * f1) : accT[p2 + j]! + D1 * f1;
              }
            }
            o = o2;
            p = p2;
            e0 = f0;
            e1 = f1;
          } else {
            // P_0 = (1 − α) M_t: the reference sums M_tᵀ de and scales after; D += de k_0ᵀ; the
            // first row's decay terms (dα, D ← (1 − α) D) here, the second's after
            for (let jj = 0; jj < d; jj++) {
              const j = REV ? d - 1 - jj : jj, kj = K[o + j]!;
              if (de0 !== 0) {
                accK[j] = ACC32 ? fr(accK[j]! + M[mt + r0 + j]! * de0) : accK[j]! + M[mt + r0 + j]! * de0;
                D[r0 + j]! += de0 * kj;
              }
              if (two && de1 !== 0) {
                accK[j] = ACC32 ? fr(accK[j]! + M[mt + r1 + j]! * de1) : accK[j]! + M[mt + r1 + j]! * de1;
                D[r1 + j]! += de1 * kj;
              }
              fro = ACC32 ? fr(fro + D[r0 + j]! * M[mt + r0 + j]!) : fro + D[r0 + j]! * M[mt + r0 + j]!;
              D[r0 + j]! *= decay;
            }
            if (two) {
              for (let jj = 0; jj < d; jj++) {
                const j = REV ? d - 1 - jj : jj;
                fro = ACC32 ? fr(fro + D[r1 + j]! * M[mt + r1 + j]!) : fro + D[r1 + j]! * M[mt + r1 + j]!;
                D[r1 + j]! *= decay;
              }
            }
          }
        }
      }
      for (let j = 0; j < d; j++) dq[oq + j] = accQ[j]!;
      dalpha[t] = -fro;
      for (let h = 0; h < nh; h++) {
        const row = t * nh + h, o = row * d, p = h * d, th = TH[row]!;
        dtheta[row] = -sth[h]!;
        for (let j = 0; j < d; j++) dk[o + j] = -th * accT[p + j]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[p + i]!;
        if (h === 0) for (let j = 0; j < d; j++) dk[o + j]! += decay * accK[j]!;
        else for (let j = 0; j < d; j++) dk[o + j]! += accK[p + j]!;
      }
    }
  }

  return { forward, replay, backward, accBuffer };
}

export const GDP_FORM: FastForm = {
  name: "gated_delta_product", loops: gdpLoops, inputs: ["k", "v", "q", "alpha", "theta"], saved: "e",
  grads: [["dk", "stepRow"], ["dv", "stepRow"], ["dq", "row"], ["dalpha", "token"], ["dtheta", "step"]],
  steps: householderSteps,
};
