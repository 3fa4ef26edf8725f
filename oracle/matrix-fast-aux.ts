/**
 * The judge's fast KDA, Comba and DPLR pairs (docs/spec/precision.md#fast-pair-new-rules): the
 * reference pairs of src/rules/kda.ts, comba.ts and dplr.ts rewritten as fused row loops over flat
 * typed arrays, as oracle/matrix-fast.ts does for Delta and Gated Delta, with the same contract: not
 * a second reference, but the reference pair bit for bit — every sum in the reference's order
 * (natural or reversed), every store into an array of the reference's dtype (the storage dtype, or
 * the accumulator's: f32 under f32 sums), every zero term the reference skips skipped. Under random
 * rounding they hand the call to the reference pair. tests/matrix-fast-aux.test.ts compares them
 * bitwise on random cases and plants one wrong term in each.
 *
 * Per token one pass over the state's rows in the forward (the read, the decay, the write and y of
 * a row together) and one in the backward: every backward quantity of row i needs row i of the
 * adjoint D, of M_t and of M_{t+1} and the token's vectors, except the per-channel decay's column
 * sums (KDA's and DPLR's dα), which the reference sums over the rows in the natural order whatever
 * the summation order: in the reversed order they take a second pass. The state history is kept as
 * checkpoints every CHECKPOINT_EVERY tokens and replayed stretch by stretch from the saved errors
 * (KDA, Comba: e_t) or reads (DPLR: u_t = M_t a_t), which need no sum, so the replay is exact.
 */
import { accumulatesInF32, productsInTF32, roundsRandomly, sumsReversed } from "../src/precision.ts";
import { comba } from "../src/rules/comba.ts";
import { dplr } from "../src/rules/dplr.ts";
import { kda } from "../src/rules/kda.ts";
import { gated_delta_product, householderSteps } from "../src/rules/gated_delta_product.ts";
import type { InnerGrads, InnerInputs, InnerPair, RuleConfig, RuleDecl, State } from "../src/rules/types.ts";
import { Tensor, alloc, type Data } from "../src/tensor.ts";

// Placeholders that only the compiled copies define (see oracle/matrix-fast.ts).
declare const MODE_ACC32: boolean, MODE_REV: boolean, MODE_EVEN: boolean;

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

/** The loops of every form; the forms without steps ignore the last argument (n_h). */
type Loops = ReturnType<typeof gdpLoops>;

/**
 * What a fast pair is made of: the loops' source, the inputs in the order the loops take them, the
 * vector the forward saves for the replay, and the gradients in the order the loops write them,
 * each with its length in tokens (token: [s]), token rows (row: [s, d]) or, for a rule with n_h
 * steps per token (`steps`), step values (step: [s, n_h]) and step rows (stepRow: [s, n_h·d]).
 */
export interface FastForm {
  readonly name: string;
  readonly loops: () => Loops;
  readonly inputs: readonly (keyof InnerInputs)[];
  readonly saved: "e" | "u";
  readonly grads: readonly (readonly [keyof InnerGrads, GradWidth])[];
  /** The steps per token, from the rule's config (Gated DeltaProduct's n_h); absent: one. */
  readonly steps?: (cfg: RuleConfig) => number;
}
type GradWidth = "token" | "row" | "step" | "stepRow";


export const KDA_FORM: FastForm = {
  name: "kda", loops: kdaLoops, inputs: ["k", "v", "q", "alpha", "theta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dalpha", "row"], ["dtheta", "token"]],
};
export const COMBA_FORM: FastForm = {
  name: "comba", loops: combaLoops, inputs: ["k", "v", "q", "p", "alpha", "theta"], saved: "e",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["dp", "row"], ["dalpha", "token"], ["dtheta", "token"]],
};
export const GDP_FORM: FastForm = {
  name: "gated_delta_product", loops: gdpLoops, inputs: ["k", "v", "q", "alpha", "theta"], saved: "e",
  grads: [["dk", "stepRow"], ["dv", "stepRow"], ["dq", "row"], ["dalpha", "token"], ["dtheta", "step"]],
  steps: householderSteps,
};
export const DPLR_FORM: FastForm = {
  name: "dplr", loops: dplrLoops, inputs: ["k", "v", "q", "a", "b", "alpha"], saved: "u",
  grads: [["dk", "row"], ["dv", "row"], ["dq", "row"], ["da", "row"], ["db", "row"], ["dalpha", "row"]],
};

/**
 * Tokens between two kept states: the value of oracle/matrix-fast.ts's CHECKPOINT_EVERY (memory
 * (T/C + C)·d² instead of (T + 1)·d²; tests/matrix-fast-aux.test.ts checks the two agree).
 */
export const CHECKPOINT_EVERY_AUX = 32;

/**
 * The fast pair of `decl` in the form `form`. `edit` rewrites the loops' source text before they
 * are compiled: the tests plant a wrong term that way (absent: the loops as written).
 */
export function auxFastPair(decl: RuleDecl, form: FastForm, edit: (source: string) => string = (s) => s): InnerPair<string> {
  const copies = new Map<string, Loops>();
  const loopsFor = (dtype: "f64" | "f32", d: number): Loops => {
    const acc32 = accumulatesInF32(), rev = sumsReversed(), even = d % 2 === 0;
    const key = `${form.name} ${dtype}${acc32 ? " acc-f32" : ""}${rev ? " reversed" : ""}${even ? " even d" : ""}`;
    let c = copies.get(key);
    if (c === undefined) {
      const literal: Record<string, boolean> = { MODE_ACC32: acc32, MODE_REV: rev, MODE_EVEN: even };
      const body = edit(form.loops.toString()).replace(/\bMODE_(ACC32|REV|EVEN)\b/g, (name) => String(literal[name]));
      c = new Function(`"use strict"; // ${key} loops\nreturn (${body})();`)() as Loops;
      copies.set(key, c);
    }
    return c;
  };
  const data = (inp: InnerInputs) => form.inputs.map((n) => {
    const t = inp[n] as Tensor | undefined;
    if (t === undefined) throw new Error(`${decl.key} fast pair: input ${String(n)} missing`);
    return t.data;
  });
  return {
    // not the reference's saved tensors: handing them to the reference pair fails loudly
    saved: ["checkpoints", form.saved],
    forward(inp: InnerInputs, state: State, cfg) {
      if (roundsRandomly() || (form.steps !== undefined && productsInTF32())) return decl.inner.forward(inp, state, cfg);
      const { d, seq_len: s } = cfg;
      const dt = inp.k.dtype, dd = d * d, C = CHECKPOINT_EVERY_AUX, nh = form.steps?.(cfg) ?? 1;
      const loops = loopsFor(dt, d), X = data(inp);
      const segments = Math.max(1, Math.ceil(s / C));
      const checkpoints = alloc(dt, segments * dd);
      const work = alloc(dt, (Math.min(C, s) + 1) * dd);
      work.set(state.M!.data);
      const sv = alloc(dt, s * nh * d), y = alloc(dt, s * d);
      for (let g = 0; g < segments; g++) {
        const t0 = g * C, t1 = Math.min(s, t0 + C);
        checkpoints.set(work.subarray(0, dd), g * dd);
        loops.forward(X, work, sv, y, d, t0, t1, nh);
        work.copyWithin(0, (t1 - t0) * dd, (t1 - t0 + 1) * dd);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], work.slice(0, dd)) },
        saved: { checkpoints: new Tensor(dt, [segments, d, d], checkpoints), [form.saved]: new Tensor(dt, [s, nh * d], sv) },
      };
    },
    backward(saved, inp, dy, cfg, dFinal) {
      if (roundsRandomly() || (form.steps !== undefined && productsInTF32())) return decl.inner.backward(saved, inp, dy, cfg, dFinal);
      const { d, seq_len: s } = cfg;
      const dt = inp.k.dtype, dd = d * d, C = CHECKPOINT_EVERY_AUX, nh = form.steps?.(cfg) ?? 1;
      const shapeOf = (w: GradWidth): number[] => (w === "token" ? [s] : w === "row" ? [s, d] : w === "step" ? [s, nh] : [s, nh * d]);
      const sizeOf = (w: GradWidth) => shapeOf(w).reduce((a, b) => a * b, 1);
      const loops = loopsFor(dt, d), X = data(inp);
      const D = loops.accBuffer(dd);
      const g0 = dFinal?.M;
      if (g0 !== undefined) {
        if (g0.size !== dd) throw new Error(`dFinal.M: ${g0.size} elements, the state has ${dd}`);
        D.set(g0.data);
      }
      const cp = saved.checkpoints!.data, sv = saved[form.saved]!.data;
      const segments = cp.length / dd;
      const work = alloc(dt, (Math.min(C, s) + 1) * dd);
      // a segment's states between the steps (n_h ≥ 2), kept by the replay for the backward
      const between = alloc(dt, Math.min(C, s) * (nh - 1) * dd);
      const G = form.grads.map(([, per]) => alloc(dt, sizeOf(per)));
      for (let g = segments - 1; g >= 0; g--) {
        const t0 = g * C, t1 = Math.min(s, t0 + C);
        work.set(cp.subarray(g * dd, (g + 1) * dd));
        loops.replay(X, sv, work, d, t0, t1, nh, between);
        loops.backward(X, sv, work, dy.data, D, d, t0, t1, G, nh, between);
      }
      const dM0 = alloc(dt, dd);
      for (let i = 0; i < dd; i++) dM0[i] = D[i]!;
      const out: Record<string, unknown> = { dState0: { M: new Tensor(dt, [d, d], dM0) } };
      form.grads.forEach(([name, per], n) => { out[name] = new Tensor(dt, shapeOf(per), G[n]!); });
      return out as InnerGrads;
    },
  };
}

/** The fast pairs of KDA, Comba, DPLR and Gated DeltaProduct, by the declaration each reproduces. */
export const AUX_FAST: readonly (readonly [RuleDecl, InnerPair<string>])[] = [
  [kda, auxFastPair(kda, KDA_FORM)],
  [comba, auxFastPair(comba, COMBA_FORM)],
  [dplr, auxFastPair(dplr, DPLR_FORM)],
  [gated_delta_product, auxFastPair(gated_delta_product, GDP_FORM)],
];
