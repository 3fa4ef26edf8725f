/**
 * MONETA (docs/spec/miras-compression.md#moneta): 2-layer MLP memory, l_p attentional bias, L2 retention
 * with α as the retain multiplier and the L_q accumulator (D9), read after the write.
 *   a_t = W1_t k_t ; h_t = silu(a_t) ; e_t = W2_t h_t − v_t ; g_t = φ_p(e_t)
 *   G2_t = g_t h_tᵀ ; u_t = (W2_tᵀ g_t) ⊙ silu'(a_t) ; G1_t = u_t k_tᵀ
 *   A_{t+1} = α_t A_t − θ_t (G_t + 2λ₂ W_t) ;  W_{t+1} = N_q(A_{t+1})     for both matrices
 *   y_t = W2_{t+1} silu(W1_{t+1} q_t)
 * With q = 2, N_q is the identity and A = W: that is §2.4 and §2.8 exactly, so one code path
 * serves both (§2.8 is §2.9 with N_qᵀ = id). A_0 = W_0 at the start of every call (README
 * "Fixture details"); A is not a state input.
 */
import { accBuffer, accStep } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros, type Data } from "../tensor.ts";
import {
  D_HIDDEN, MlpScratch, chainIn, chainOut, dHidden, hashInit, innerGradDot, innerGradient, mlpFrozenRead, mlpRead,
  mlpStateShapes, randomMlpState, readVjp, type Bias,
} from "./mlp.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { InnerInputs, Named, RuleConfig, RuleDecl, State } from "./types.ts";

/** §2.3 smoothing of |e| and of the fast-path test. */
const LP_EPS = 1e-6;
const PATH_TOL = 1e-6;
/** §2.5: smoothing inside the power and the divisor fallback. */
const LQ_EPS = 1e-12;
const LQ_TINY = 1e-30;

/** §2.3 general path: φ(e) = p tanh(a e) (e²+ε)^{(p−1)/2}, smooth at e = 0 (MIRAS Remark 5). */
export function lpBiasGeneral(p: number, a: number): Bias {
  return {
    phi: (e) => p * Math.tanh(a * e) * Math.pow(e * e + LP_EPS, (p - 1) / 2),
    dphi: (e) => {
      const th = Math.tanh(a * e), m = e * e + LP_EPS;
      return p * (a * (1 - th * th) * Math.pow(m, (p - 1) / 2) + th * (p - 1) * e * Math.pow(m, (p - 3) / 2));
    },
  };
}

/** §2.3 dispatch: p ≈ 2 gives 2e (the factor 2 is kept), p ≈ 1 gives tanh(a e), else the general path. */
export function lpBias(p: number, a: number): Bias {
  if (Math.abs(p - 2) < PATH_TOL) return { phi: (e) => 2 * e, dphi: () => 2 };
  if (Math.abs(p - 1) < PATH_TOL) {
    return {
      phi: (e) => Math.tanh(a * e),
      dphi: (e) => {
        const th = Math.tanh(a * e);
        return a * (1 - th * th);
      },
    };
  }
  return lpBiasGeneral(p, a);
}

export function isL2(q: number): boolean {
  return Math.abs(q - 2) < PATH_TOL;
}

/**
 * n = (Σ (A²+1e-12)^{q/2})^{1/q}, summed in f64 (§2.5), and the divisor s = n^{q−2}. A plain f32
 * reference (withAccumulate("f32")) holds the sum, n and s in f32, as an f32 kernel does.
 */
function lqNorm(A: Data, ao: number, len: number, q: number): { n: number; s: number } {
  let sum = 0;
  for (let i = 0; i < len; i++) {
    const x = A[ao + i]!;
    sum = accStep(sum + accStep(Math.pow(x * x + LQ_EPS, q / 2)));
  }
  const n = accStep(Math.pow(sum, 1 / q));
  return { n, s: accStep(Math.pow(n, q - 2)) };
}

/** W = N_q(A) = A / n^{q−2} (§2.5); A itself where the divisor underflows. */
export function lqNormalize(A: Data, ao: number, len: number, q: number, W: Data, wo: number): void {
  const { s } = isL2(q) ? { s: 1 } : lqNorm(A, ao, len, q);
  const div = s < LQ_TINY ? 1 : s;
  for (let i = 0; i < len; i++) W[wo + i] = A[ao + i]! / div;
}

/**
 * out += N_qᵀ(A)[Wbar] (§2.9): Wbar/s − c ⟨Wbar, A⟩ A ⊙ (A² + 1e-12)^{(q−2)/2}, c = (q−2)/(n² s²),
 * from ∂s/∂A = (q−2) n^{−2} A ⊙ (A²+1e-12)^{(q−2)/2}.
 */
export function lqNormalizeVjpAdd(A: Data, ao: number, len: number, q: number, Wbar: Data, out: Data): void {
  const { n, s } = isL2(q) ? { n: 1, s: 1 } : lqNorm(A, ao, len, q);
  if (isL2(q) || s < LQ_TINY) {
    for (let i = 0; i < len; i++) out[i]! += Wbar[i]!;
    return;
  }
  // The sheet zeroes c when n²s² ≤ 1e-30; that cut is not part of the forward function (which
  // divides by s whenever s ≥ 1e-30), so it would make the VJP inexact (D2). n ≥ 1e-6 thanks to
  // the 1e-12 inside the power, so n²s² = n^{2q−2} never vanishes for q in the declared range.
  const c = accStep((q - 2) / (n * n * s * s));
  const wa = accStep(c * K.dot(Wbar, A, len, 0, ao));
  for (let i = 0; i < len; i++) {
    const x = A[ao + i]!;
    out[i]! += Wbar[i]! / s - wa * x * Math.pow(x * x + LQ_EPS, (q - 2) / 2);
  }
}

interface MonetaHyper { dh: number; p: number; q: number; l2: number; a: number }

function hyperOf(cfg: RuleConfig): MonetaHyper {
  return { dh: dHidden(cfg), p: Number(cfg.p), q: Number(cfg.q), l2: Number(cfg.lambda_2), a: Number(cfg.sign_sharpness) };
}

type MonetaSaved = "w1States" | "w2States" | "a1States" | "a2States";

/** The forward of §2.4/§2.5 with the bias φ given (the rule passes the §2.3 dispatch). */
function monetaForward({ k, v, q, alpha, theta }: InnerInputs, state: State, cfg: RuleConfig, bias: Bias):
  { y: Tensor; finalState: State; saved: Named<MonetaSaved> } {
  const { d, seq_len: s } = cfg, { dh, q: lq, l2 } = hyperOf(cfg);
  const dt = k.dtype, n1 = dh * d, n2 = d * dh, l2path = isL2(lq);
  const W1 = alloc(dt, (s + 1) * n1), W2 = alloc(dt, (s + 1) * n2);
  W1.set(state.W1!.data);
  W2.set(state.W2!.data);
  // A = W on the L2 path, so the accumulator update writes W directly.
  const A1 = l2path ? W1 : alloc(dt, (s + 1) * n1), A2 = l2path ? W2 : alloc(dt, (s + 1) * n2);
  if (!l2path) {
    A1.set(state.W1!.data);
    A2.set(state.W2!.data);
  }
  const sc = new MlpScratch(dt, d, dh);
  const y = alloc(dt, s * d);
  for (let t = 0; t < s; t++) {
    const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
    const al = alpha!.data[t]!, th = theta!.data[t]!;
    innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, bias);
    // A_{t+1} = α A_t − θ (G_t + 2λ₂ W_t), G1 = u kᵀ, G2 = g hᵀ
    for (let i = 0; i < dh; i++) {
      const ui = sc.u[i]!;
      for (let j = 0; j < d; j++) {
        const ij = i * d + j;
        A1[x1 + ij] = al * A1[c1 + ij]! - th * (ui * k.data[o + j]! + 2 * l2 * W1[c1 + ij]!);
      }
    }
    for (let i = 0; i < d; i++) {
      const gi = sc.g[i]!;
      for (let j = 0; j < dh; j++) {
        const ij = i * dh + j;
        A2[x2 + ij] = al * A2[c2 + ij]! - th * (gi * sc.h[j]! + 2 * l2 * W2[c2 + ij]!);
      }
    }
    if (!l2path) {
      lqNormalize(A1, x1, n1, lq, W1, x1);
      lqNormalize(A2, x2, n2, lq, W2, x2);
    }
    mlpRead(sc, W1, x1, W2, x2, q.data, o, y, o);
  }
  const acc = (A: Data, rows: number, cols: number) =>
    l2path ? new Tensor(dt, [0], alloc(dt, 0)) : new Tensor(dt, [s + 1, rows, cols], A);
  return {
    y: new Tensor(dt, [s, d], y),
    finalState: { W1: new Tensor(dt, [dh, d], W1.slice(s * n1)), W2: new Tensor(dt, [d, dh], W2.slice(s * n2)) },
    saved: {
      w1States: new Tensor(dt, [s + 1, dh, d], W1), w2States: new Tensor(dt, [s + 1, d, dh], W2),
      a1States: acc(A1, dh, d), a2States: acc(A2, d, dh),
    },
  };
}

export const moneta: RuleDecl<"moneta"> = {
  key: "moneta",
  sheet: "docs/spec/miras-compression.md#moneta",
  hyper: {
    d_hidden: D_HIDDEN,
    // p ≤ 3 (the design target, §2.10): φ' grows like p(p−1)|e|^{p−2}, and from p ≈ 4 the inner step
    // θ φ'(e) ‖h‖² passes 2 for |e| ~ 1 (d = 1 keys and values reach 3): the states diverge.
    p: { kind: "real", default: 2, min: 1, max: 16, sample: [1, 3], atoms: [1, 2], doc: "l_p attentional bias exponent (§2.3); 1 and 2 are fast paths" },
    // ‖N_q(A)‖_q = ‖A‖_q^{3−q}. q < 2: W outgrows A and with λ₂ > 0 the map A ← αA − 2θλ₂W diverges.
    // q > 3: W blows up as A shrinks (from W2_0 = 0 the first write gives W2_1 ~ 1e4), the loss is
    // then dominated by one huge output and f64 central differences lose every other gradient.
    // At a thousand tokens q = 2: for q > 2 the Jacobian of N_q grows like ‖A‖^{2−q} as the
    // accumulator fades under forgetting, and the backward explodes over the sequence (regime sweep:
    // dk at scale 2465 for q = 2.95, d = 1; dv at 3.8e21 for q = 2.94, d = 4, where the plain f32
    // reference overflows): no precision judges such a gradient (docs/spec/conformance.md#regime).
    q: { kind: "real", default: 2, min: 1, max: 16, sample: [2, 3], atoms: [2], longSample: [2, 2], doc: "L_q accumulator exponent (§2.5); 2 is plain L2 retention" },
    // ≤ 0.25 keeps the retain factor α − 2λ₂θ above −1/2 at the checks' gate levels (θ ≤ 0.8).
    lambda_2: { kind: "real", default: 0.01, min: 0, max: 10, sample: [0, 0.25], doc: "L2 retention strength λ₂" },
    sign_sharpness: { kind: "real", default: 10, min: 1e-3, max: 1000, sample: [2, 10], doc: "tanh sharpness a of the smooth sign (§2.3)" },
  },
  projection: "memory",
  gates: ["alpha", "theta"],
  normalizeKQ: false,
  omega: false,
  stateShapes: mlpStateShapes,
  init: hashInit,
  randomState: randomMlpState,
  inner: {
    saved: ["w1States", "w2States", "a1States", "a2States"],
    forward: (inp, state, cfg) => monetaForward(inp, state, cfg, lpBias(Number(cfg.p), Number(cfg.sign_sharpness))),
    backward({ w1States, w2States, a1States, a2States }, { k, v, q, alpha, theta }, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg, { dh, p, q: lq, l2, a: sharp } = hyperOf(cfg);
      const dt = k.dtype, n1 = dh * d, n2 = d * dh, l2path = isL2(lq);
      const bias = lpBias(p, sharp);
      const W1 = w1States!.data, W2 = w2States!.data;
      const A1 = l2path ? W1 : a1States!.data, A2 = l2path ? W2 : a2States!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      // Ā = ∂L/∂A_{t+1}: holds Â (later tokens) on entry to a token, the total after the read.
      // The final state is W_s = N_q(A_s): dFinal enters Ā through N_qᵀ(A_s) (the identity on the L2 path).
      const F1 = adjointFrom(dFinal, "W1", n1), F2 = adjointFrom(dFinal, "W2", n2);
      const Ab1 = accBuffer(n1), Ab2 = accBuffer(n2);
      lqNormalizeVjpAdd(A1, s * n1, n1, lq, F1, Ab1);
      lqNormalizeVjpAdd(A2, s * n2, n2, lq, F2, Ab2);
      // R = read's ∂L/∂W_{t+1}; D = ∂L/∂W_t (L_q path only: on the L2 path both are Ā itself).
      const R1 = accBuffer(l2path ? 0 : n1), R2 = accBuffer(l2path ? 0 : n2);
      const D1 = accBuffer(l2path ? 0 : n1), D2 = accBuffer(l2path ? 0 : n2);
      const sc = new MlpScratch(dt, d, dh);
      for (let t = s - 1; t >= 0; t--) {
        const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
        const al = alpha!.data[t]!, th = theta!.data[t]!;
        // (read) Ā = N_qᵀ(A_{t+1})[R] + Â
        if (l2path) {
          readVjp(sc, W1, x1, W2, x2, q.data, dy.data, o, Ab1, Ab2);
        } else {
          R1.fill(0);
          R2.fill(0);
          readVjp(sc, W1, x1, W2, x2, q.data, dy.data, o, R1, R2);
          lqNormalizeVjpAdd(A1, x1, n1, lq, R1, Ab1);
          lqNormalizeVjpAdd(A2, x2, n2, lq, R2, Ab2);
        }
        dq.set(sc.dq, o);
        innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, bias);
        chainIn(sc, Ab1, Ab2, k.data, o);
        // (gates) dα = ⟨Ā, A_t⟩ ; dθ = −⟨Ā, G_t + 2λ₂ W_t⟩
        dalpha[t] = K.frob(Ab1, 0, A1, c1, n1) + K.frob(Ab2, 0, A2, c2, n2);
        dtheta[t] = -(innerGradDot(sc) + 2 * l2 * (K.frob(Ab1, 0, W1, c1, n1) + K.frob(Ab2, 0, W2, c2, n2)));
        if (l2path) {
          // D = (α − 2λ₂θ) Ŵ + chain, and it is the next Ŵ
          const keep = al - 2 * l2 * th;
          for (let i = 0; i < n1; i++) Ab1[i]! *= keep;
          for (let i = 0; i < n2; i++) Ab2[i]! *= keep;
          chainOut(sc, -th, W1, c1, W2, c2, k.data, o, Ab1, Ab2, bias);
        } else {
          // D = −2λ₂θ Ā + chain ;  Â ← α Ā + N_qᵀ(A_t)[D]  (W_0 is not N_q(A_0): nothing at t = 0)
          for (let i = 0; i < n1; i++) D1[i] = -2 * l2 * th * Ab1[i]!;
          for (let i = 0; i < n2; i++) D2[i] = -2 * l2 * th * Ab2[i]!;
          chainOut(sc, -th, W1, c1, W2, c2, k.data, o, D1, D2, bias);
          for (let i = 0; i < n1; i++) Ab1[i]! *= al;
          for (let i = 0; i < n2; i++) Ab2[i]! *= al;
          if (t > 0) {
            lqNormalizeVjpAdd(A1, c1, n1, lq, D1, Ab1);
            lqNormalizeVjpAdd(A2, c2, n2, lq, D2, Ab2);
          } else {
            // A_0 = W_0: the initial state's gradient is its direct uses D plus α Ā of A_0
            for (let i = 0; i < n1; i++) Ab1[i]! += D1[i]!;
            for (let i = 0; i < n2; i++) Ab2[i]! += D2[i]!;
          }
        }
        dk.set(sc.dk, o);
        dv.set(sc.dv, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { W1: gradTensor(dt, [dh, d], Ab1), W2: gradTensor(dt, [d, dh], Ab2) },
      };
    },
  },
  frozen: mlpFrozenRead,
  derivedState: ["A1", "A2"],
  invariants: [
    {
      name: "p=2 fast path vs general formula",
      spec: "docs/spec/miras-compression.md#moneta-bias: p≈2 gives φ = 2e, the general path p tanh(a e)(e²+ε)^{(p−1)/2} at p = 2",
      check(dtype) {
        const a = 10;
        const fast = lpBias(2, a), gen = lpBiasGeneral(2, a);
        // |e| ≥ 1 ≫ 1/a. There tanh(a|e|) = 1 − δ_t with δ_t ≤ 2e^{−2a|e|}, and
        // sqrt(e²+ε) = |e|(1 + δ_s) with δ_s ≤ ε/(2e²); so the general φ/φ' differ from the fast
        // 2e/2 by at most these relative amounts (the sech² term of φ' adds 4a e^{−2a|e|} sqrt(e²+ε)).
        // Twice that bound plus 1e-15 of rounding is allowed: the two paths are NOT identical.
        for (let i = 0; i <= 40; i++) {
          for (const sgn of [1, -1]) {
            const e = sgn * (1 + i * 0.05), ae = Math.abs(e);
            const dT = 2 * Math.exp(-2 * a * ae), dS = LP_EPS / (2 * e * e);
            const tolPhi = 2 * (dT + dS) + 1e-15;
            const tolD = 2 * (dT + dS + 4 * a * Math.exp(-2 * a * ae) * Math.sqrt(e * e + LP_EPS)) + 1e-15;
            const rp = Math.abs(gen.phi(e) - fast.phi(e)) / Math.abs(fast.phi(e));
            if (!(rp <= tolPhi)) return `φ at e=${e}: general ${gen.phi(e)} vs fast ${fast.phi(e)} (rel ${rp} > ${tolPhi})`;
            const rd = Math.abs(gen.dphi(e) - fast.dphi(e)) / 2;
            if (!(rd <= tolD)) return `φ' at e=${e}: general ${gen.dphi(e)} vs fast 2 (rel ${rd} > ${tolD})`;
          }
        }
        // End to end: s = 1 from W2_0 = 0 gives e_0 = −v_0, r_0 = 0, so W1_1 ignores φ and
        // y_0 = −θ φ(e_0) (h_0ᵀ z_0) is linear in φ: each y_i inherits the relative bound of e_i.
        const d = 4, dh = 3;
        const cfg = { d, seq_len: 1, d_hidden: dh, p: 2, q: 2, lambda_2: 0.01, sign_sharpness: a };
        const state = hashInit(cfg, dtype);
        const k = zeros(dtype, [1, d]), v = zeros(dtype, [1, d]), qv = zeros(dtype, [1, d]);
        const ev = [1.25, -2, 1.5, -3];
        for (let j = 0; j < d; j++) {
          k.data[j] = 0.3 * (j + 1);
          v.data[j] = -ev[j]!;
          qv.data[j] = 0.5 - 0.2 * j;
        }
        const alpha = zeros(dtype, [1]), theta = zeros(dtype, [1]);
        alpha.data[0] = 0.9;
        theta.data[0] = 0.5;
        const inp = { k, v, q: qv, x: k, alpha, theta };
        const yFast = moneta.inner.forward(inp, state, cfg).y.data;
        const yGen = monetaForward(inp, state, cfg, gen).y.data;
        const ulp = dtype === "f64" ? 2 ** -52 : 2 ** -23;
        for (let i = 0; i < d; i++) {
          const ae = Math.abs(ev[i]!);
          // relative φ bound as above, plus a few roundings of the run's dtype on each side
          const tol = (2 * (2 * Math.exp(-2 * a * ae) + LP_EPS / (2 * ae * ae)) + 16 * ulp) * Math.abs(yFast[i]!);
          if (!(Math.abs(yGen[i]! - yFast[i]!) <= tol)) return `y[${i}]: general path ${yGen[i]} vs p=2 fast path ${yFast[i]} (tol ${tol})`;
        }
        return null;
      },
    },
    {
      name: "L_q normalisation unit anchor",
      spec: "docs/spec/miras-compression.md#moneta-lq: A=[1,−2,3,0.5], q=4 gives ‖A‖₄ = 98.0625^{1/4} and W = A/‖A‖₄²",
      check(dtype) {
        const A = [1, -2, 3, 0.5];
        const norm2 = Math.sqrt(98.0625);
        // f64: the 1e-12 inside the power moves ‖A‖₄² by ~1.5e-13 relative; f32: one rounding of the stored W.
        const tol = dtype === "f64" ? 1e-12 : 2 ** -23;
        const cmp = (got: Data, what: string): string | null => {
          for (let i = 0; i < 4; i++) {
            const want = A[i]! / norm2;
            if (!(Math.abs(got[i]! - want) <= tol * Math.abs(want))) return `${what}[${i}] = ${got[i]}, expected ${want}`;
          }
          return null;
        };
        const Ad = alloc(dtype, 4), W = alloc(dtype, 4);
        Ad.set(A);
        lqNormalize(Ad, 0, 4, 4, W, 0);
        const direct = cmp(W, "N_4(A)");
        if (direct !== null) return direct;
        // Through the rule: α = 1, θ = 0 makes A_1 = A_0 = W_0, so W_1 = N_4(W_0) for both matrices.
        // (q = 4 lies outside the declared range, which only bounds generated and validated configs.)
        const d = 4, cfg = { d, seq_len: 1, d_hidden: 1, p: 2, q: 4, lambda_2: 0.01, sign_sharpness: 10 };
        const state = { W1: new Tensor(dtype, [1, d], Ad.slice()), W2: new Tensor(dtype, [d, 1], Ad.slice()) };
        const k = zeros(dtype, [1, d]), alpha = zeros(dtype, [1]), theta = zeros(dtype, [1]);
        for (let j = 0; j < d; j++) k.data[j] = 0.25 * (j + 1);
        alpha.data[0] = 1;
        const r = moneta.inner.forward({ k, v: k, q: k, x: k, alpha, theta }, state, cfg);
        return cmp(r.finalState.W1!.data, "W1_1") ?? cmp(r.finalState.W2!.data, "W2_1");
      },
    },
  ],
};
