/**
 * MEMORA (docs/spec/miras-compression.md#memora): 2-layer MLP memory whose weight rows live on the
 * probability simplex; L2 bias (g = e, no factor 2); KL retention as a row softmax; the read
 * happens BEFORE the write.
 *   b_t = W1_t q_t ; z_t = silu(b_t) ; y_t = W2_t z_t
 *   a_t = W1_t k_t ; h_t = silu(a_t) ; e_t = W2_t h_t − v_t
 *   G2_t = e_t h_tᵀ ; u_t = (W2_tᵀ e_t) ⊙ silu'(a_t) ; G1_t = u_t k_tᵀ
 *   W_{t+1}[i,:] = softmax(α_t logc(W_t[i,:]) − θ_t G_t[i,:])      logc(w) = ln(max(w, 1e-8))
 */
import { accBuffer, accStep } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng, initHash } from "../rng.ts";
import { Tensor, alloc, zeros, type DType, type Data } from "../tensor.ts";
import {
  D_HIDDEN, MlpScratch, chainIn, chainOut, dHidden, innerGradDot, innerGradient, mlpFrozenRead, mlpRead,
  mlpStateShapes, readVjp, type Bias,
} from "./mlp.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { InnerInputs, RuleConfig, RuleDecl, StateSampler } from "./types.ts";

/** §4.6 log clamp. */
const LOG_FLOOR = 1e-8;

export function logc(w: number): number {
  return Math.log(Math.max(w, LOG_FLOOR));
}

/** Exact derivative of logc: 1/w above the clamp, 0 where the clamp is active (docs/spec/decisions.md#d2). */
export function logcPrime(w: number): number {
  return w > LOG_FLOOR ? 1 / w : 0;
}

export const L2_BIAS: Bias = { phi: (e) => e, dphi: () => 1 };

/** softmax of the f64 row z (length n) into out[oo..oo+n), max-subtracted (§0, §4.6). */
export function softmaxRowInto(z: Data, n: number, out: Data, oo: number): void {
  let mx = -Infinity;
  for (let j = 0; j < n; j++) mx = Math.max(mx, z[j]!);
  let sum = 0;
  for (let j = 0; j < n; j++) {
    z[j] = Math.exp(z[j]! - mx);
    sum = accStep(sum + z[j]!);
  }
  // §0: if the sum is not > 0 the raw exps are kept (never happens after max subtraction)
  const div = sum > 0 ? sum : 1;
  for (let j = 0; j < n; j++) out[oo + j] = z[j]! / div;
}

/**
 * The KL write of both layers from W_t (at c1, c2) into W_{t+1} (at x1, x2), with the inner gradient
 * (u, g, h) already in sc; Z is a scratch row of length max(d, dh).
 */
export function memoraWrite(sc: MlpScratch, W1: Data, c1: number, x1: number, W2: Data, c2: number, x2: number,
  k: Data, o: number, al: number, th: number, d: number, dh: number, Z: Data): void {
  // Z1 = α logc(W1_t) − θ u kᵀ, row by row (rows of length d)
  for (let i = 0; i < dh; i++) {
    for (let j = 0; j < d; j++) Z[j] = al * logc(W1[c1 + i * d + j]!) - th * sc.u[i]! * k[o + j]!;
    softmaxRowInto(Z, d, W1, x1 + i * d);
  }
  // Z2 = α logc(W2_t) − θ e hᵀ (rows of length dh)
  for (let i = 0; i < d; i++) {
    for (let j = 0; j < dh; j++) Z[j] = al * logc(W2[c2 + i * dh + j]!) - th * sc.g[i]! * sc.h[j]!;
    softmaxRowInto(Z, dh, W2, x2 + i * dh);
  }
}

/** §4.2: W1[r,:] = softmax(0.1·(hash(r·d+c) − 0.5))_c, W2 = 1/dh. */
function memoraInit(cfg: RuleConfig, dtype: DType): Record<string, Tensor> {
  const { d } = cfg, dh = dHidden(cfg);
  const logits = alloc(dtype, dh * d);
  for (let i = 0; i < logits.length; i++) logits[i] = 0.1 * (initHash(i) - 0.5);
  const W1 = new Tensor(dtype, [dh, d], K.softmaxRows(logits, dh, d, alloc(dtype, dh * d)));
  const W2 = new Tensor(dtype, [d, dh]);
  W2.data.fill(1 / dh);
  return { W1, W2 };
}

/** Random simplex rows: softmax of U(−1, 1) logits, so entries are bounded away from 0 (≥ e^{−2}/n). */
const randomSimplexState: StateSampler = (cfg, dtype, rnd) => {
  const { d } = cfg, dh = dHidden(cfg);
  const rows = (r: number, c: number) => {
    const z = alloc(dtype, r * c);
    for (let i = 0; i < z.length; i++) z[i] = 2 * rnd() - 1;
    return new Tensor(dtype, [r, c], K.softmaxRows(z, r, c, alloc(dtype, r * c)));
  };
  return { W1: rows(dh, d), W2: rows(d, dh) };
};

export const memora: RuleDecl<"memora"> = {
  key: "memora",
  sheet: "docs/spec/miras-compression.md#memora",
  hyper: { d_hidden: D_HIDDEN },
  projection: "memory",
  gates: ["alpha", "theta"],
  normalizeKQ: false,
  omega: false,
  stateShapes: mlpStateShapes,
  init: memoraInit,
  randomState: randomSimplexState,
  // Read before write: with s = 1 the only read sees W_0, so k, v and the gates get no gradient.
  // d = 1: every W1 row is the 1-simplex [1], so h_j = silu(k) is the same for all j, G2's row is
  // constant and the softmax ignores it: k, v and θ get no gradient either.
  checkMinimums: { d: 2, seq_len: 2 },
  inner: {
    saved: ["w1States", "w2States"],
    forward({ k, v, q, alpha, theta }, state, cfg) {
      const { d, seq_len: s } = cfg, dh = dHidden(cfg);
      const dt = k.dtype, n1 = dh * d, n2 = d * dh;
      const W1 = alloc(dt, (s + 1) * n1), W2 = alloc(dt, (s + 1) * n2);
      W1.set(state.W1!.data);
      W2.set(state.W2!.data);
      const sc = new MlpScratch(dt, d, dh);
      const Z = accBuffer(Math.max(d, dh));
      const y = alloc(dt, s * d);
      for (let t = 0; t < s; t++) {
        const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
        const al = alpha!.data[t]!, th = theta!.data[t]!;
        mlpRead(sc, W1, c1, W2, c2, q.data, o, y, o);
        innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, L2_BIAS);
        memoraWrite(sc, W1, c1, x1, W2, c2, x2, k.data, o, al, th, d, dh, Z);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { W1: new Tensor(dt, [dh, d], W1.slice(s * n1)), W2: new Tensor(dt, [d, dh], W2.slice(s * n2)) },
        saved: { w1States: new Tensor(dt, [s + 1, dh, d], W1), w2States: new Tensor(dt, [s + 1, d, dh], W2) },
      };
    },
    backward({ w1States, w2States }, { k, v, q, alpha, theta }, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg, dh = dHidden(cfg);
      const dt = k.dtype, n1 = dh * d, n2 = d * dh;
      const W1 = w1States!.data, W2 = w2States!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      // Ŵ = ∂L/∂W_{t+1}, turned into dZ in place; D = ∂L/∂W_t, the next Ŵ.
      let Wh1 = adjointFrom(dFinal, "W1", n1), Wh2 = adjointFrom(dFinal, "W2", n2);
      let D1 = accBuffer(n1), D2 = accBuffer(n2);
      const sc = new MlpScratch(dt, d, dh);
      for (let t = s - 1; t >= 0; t--) {
        const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
        const al = alpha!.data[t]!, th = theta!.data[t]!;
        // (softmax) dZ[i,j] = W_{t+1}[i,j] (Ŵ[i,j] − Σ_j' W_{t+1}[i,j'] Ŵ[i,j'])
        softmaxRowsVjpInPlace(W1, x1, dh, d, Wh1);
        softmaxRowsVjpInPlace(W2, x2, d, dh, Wh2);
        const dZ1 = Wh1, dZ2 = Wh2;
        // (gates) dα = ⟨dZ, logc(W_t)⟩ ; dθ = −⟨dZ, G_t⟩
        let da = 0;
        for (let i = 0; i < n1; i++) da = accStep(da + dZ1[i]! * accStep(logc(W1[c1 + i]!)));
        for (let i = 0; i < n2; i++) da = accStep(da + dZ2[i]! * accStep(logc(W2[c2 + i]!)));
        dalpha[t] = da;
        innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, L2_BIAS);
        chainIn(sc, dZ1, dZ2, k.data, o);
        dtheta[t] = -innerGradDot(sc);
        // (direct) D = α dZ ⊙ logc'(W_t) ; dG = −θ dZ, then the inner-gradient chain
        for (let i = 0; i < n1; i++) D1[i] = al * dZ1[i]! * logcPrime(W1[c1 + i]!);
        for (let i = 0; i < n2; i++) D2[i] = al * dZ2[i]! * logcPrime(W2[c2 + i]!);
        chainOut(sc, -th, W1, c1, W2, c2, k.data, o, D1, D2, L2_BIAS);
        dk.set(sc.dk, o);
        dv.set(sc.dv, o);
        // (read, uses W_t)
        readVjp(sc, W1, c1, W2, c2, q.data, dy.data, o, D1, D2);
        dq.set(sc.dq, o);
        [Wh1, D1] = [D1, Wh1];
        [Wh2, D2] = [D2, Wh2];
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        // after the last swap Ŵ holds D of t = 0: ∂L/∂W_0
        dState0: { W1: gradTensor(dt, [dh, d], Wh1), W2: gradTensor(dt, [d, dh], Wh2) },
      };
    },
  },
  frozen: mlpFrozenRead,
  invariants: [
    {
      name: "rows stay on the simplex",
      spec: "docs/spec/miras-compression.md#memora-forward: every row of W1 and W2 sums to 1 and every entry is > 0, at every t",
      check(dtype, seed) {
        const d = 5, dh = 3, s = 12;
        const cfg = { d, seq_len: s, d_hidden: dh };
        const rng = new Rng(seed);
        const r = memora.inner.forward(randomInputs(dtype, s, d, rng, 2), randomSimplexState(cfg, dtype, () => rng.next()), cfg);
        return simplexViolation(r.saved.w1States!.data, dh, d, s, 0, dtype, "W1")
          ?? simplexViolation(r.saved.w2States!.data, d, dh, s, 0, dtype, "W2");
      },
    },
    {
      name: "zero start gives uniform rows",
      spec: "docs/spec/miras-compression.md#memora-state: from W = 0, logc maps 0 to ln(1e-8) and the t=0 inner gradient is 0, so every row of W_1 is uniform",
      check(dtype, seed) {
        const d = 4, dh = 3, s = 3;
        const cfg = { d, seq_len: s, d_hidden: dh };
        const rng = new Rng(seed);
        const state = { W1: zeros(dtype, [dh, d]), W2: zeros(dtype, [d, dh]) };
        const r = memora.inner.forward(randomInputs(dtype, s, d, rng, 1), state, cfg);
        const W1 = r.saved.w1States!.data, W2 = r.saved.w2States!.data;
        const ulp = dtype === "f64" ? 2 ** -52 : 2 ** -23;
        for (let i = 0; i < dh * d; i++) {
          if (!(Math.abs(W1[dh * d + i]! - 1 / d) <= 2 * ulp / d)) return `W1_1 entry ${i} = ${W1[dh * d + i]}, expected 1/${d}`;
        }
        for (let i = 0; i < d * dh; i++) {
          if (!(Math.abs(W2[d * dh + i]! - 1 / dh) <= 2 * ulp / dh)) return `W2_1 entry ${i} = ${W2[d * dh + i]}, expected 1/${dh}`;
        }
        return simplexViolation(W1, dh, d, s, 1, dtype, "W1") ?? simplexViolation(W2, d, dh, s, 1, dtype, "W2");
      },
    },
  ],
};

/** In place: Ŵ ← dZ, the per-row softmax VJP with the softmax output P = W_{t+1} at offset po. */
export function softmaxRowsVjpInPlace(P: Data, po: number, rows: number, cols: number, G: Data): void {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let dotPG = 0;
    for (let j = 0; j < cols; j++) dotPG = accStep(dotPG + P[po + o + j]! * G[o + j]!);
    for (let j = 0; j < cols; j++) G[o + j] = P[po + o + j]! * (G[o + j]! - dotPG);
  }
}

/** Inputs for the invariants: k, v, q ~ U(−scale, scale), α ~ U(0.05, 0.95), θ ~ U(0.05, 2). */
function randomInputs(dtype: DType, s: number, d: number, rng: Rng, scale: number): InnerInputs {
  const t = (shape: number[], lo: number, hi: number) => {
    const x = zeros(dtype, shape);
    for (let i = 0; i < x.size; i++) x.data[i] = rng.uniform(lo, hi);
    return x;
  };
  const k = t([s, d], -scale, scale);
  return { k, v: t([s, d], -scale, scale), q: t([s, d], -scale, scale), x: k, alpha: t([s], 0.05, 0.95), theta: t([s], 0.05, 2) };
}

/**
 * First state t0..s whose row is off the simplex. Tolerance: 1e-12 in f64; in f32 each stored
 * entry carries one rounding (2^-24 relative), so a row of n entries may miss 1 by n·2^-24; 2x that.
 */
function simplexViolation(W: Data, rows: number, cols: number, s: number, t0: number, dtype: DType, name: string): string | null {
  const tol = dtype === "f64" ? 1e-12 : cols * 2 ** -23;
  const n = rows * cols;
  for (let t = t0; t <= s; t++) {
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let j = 0; j < cols; j++) {
        const w = W[t * n + r * cols + j]!;
        if (!(w > 0)) return `${name}_${t}[${r},${j}] = ${w}, expected > 0`;
        sum += w;
      }
      if (!(Math.abs(sum - 1) <= tol)) return `${name}_${t} row ${r} sums to ${sum} (|sum − 1| > ${tol})`;
    }
  }
  return null;
}
