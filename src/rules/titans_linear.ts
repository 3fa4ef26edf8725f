/**
 * Titans-linear as fla ships it (docs/spec/ttt.md#titans-linear): Titans' momentum and decay
 * (docs/spec/titans-family.md#titans-forward) on the LayerNorm reconstruction objective, read after
 * write through the output LayerNorm with residual. Per token (the rule's C = 1):
 *   ℓ(M; k, v) = ‖γ ⊙ N(M k) + β − (v − k)‖² ;  ∇_M ℓ = 2 u kᵀ, u = Nᵀ(M_t k_t; γ ⊙ r)
 *   S_{t+1} = η_t S_t − θ_t ∇_M ℓ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   o_t = M_{t+1} q_t ;  y_t = o_t + γ ⊙ N(o_t) + β
 * γ, β (ln_w, ln_b) travel in the state unchanged (docs/spec/decisions.md#ttt-ln-state).
 */
import { accBuffer } from "../precision.ts";
import { Rng, uniformTensor } from "../rng.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros, type Data, type DType } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { lnOutFrozenRead, lnReconGrad, lnReconLoss, lnReconScratch, lnReconVjp, outLn, outLnVjp } from "./ln-recon.ts";
import type { RuleConfig, RuleDecl, State } from "./types.ts";

/** γ or β once per token: what a checkpointed stretch of tokens saves must be per token. */
function rows(dt: DType, x: Data, s: number): Data {
  const out = alloc(dt, s * x.length);
  for (let t = 0; t < s; t++) out.set(x, t * x.length);
  return out;
}

export const titans_linear: RuleDecl<"titans_linear"> = {
  key: "titans_linear",
  sheet: "docs/spec/ttt.md#titans-linear",
  hyper: {
    eps: {
      kind: "real", default: 1e-6, min: 0, max: 1, sample: [1e-6, 1e-2],
      doc: "ε under the square root of both LayerNorms",
    },
  },
  projection: "memory",
  gates: ["alpha", "theta", "eta"],
  // the level L2-normalises k and q as Titans' does (docs/spec/decisions.md#titans-linear-norm)
  normalizeKQ: true,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d], S: [d, d], ln_w: [d], ln_b: [d] }),
  // M_0 = I as TTT-Linear's (docs/spec/decisions.md#ttt-init)
  init: ({ d }, dtype) => {
    const M = zeros(dtype, [d, d]), w = zeros(dtype, [d]);
    for (let i = 0; i < d; i++) M.data[i * d + i] = 1;
    w.data.fill(1);
    return { M, S: zeros(dtype, [d, d]), ln_w: w, ln_b: zeros(dtype, [d]) };
  },
  randomState: ({ d }, dtype, rnd) => {
    const t = (shape: number[], f: () => number) => {
      const x = new Tensor(dtype, shape);
      for (let i = 0; i < x.size; i++) x.data[i] = f();
      return x;
    };
    return {
      M: t([d, d], () => (rnd() - 0.5) / Math.sqrt(d)), S: t([d, d], () => (rnd() - 0.5) / Math.sqrt(d)),
      ln_w: t([d], () => 0.5 + rnd()), ln_b: t([d], () => rnd() - 0.5),
    };
  },
  inner: {
    saved: ["mStates", "sStates", "u", "xh", "sig", "oh", "osig", "lnW", "lnB"],
    forward({ k, v, q, alpha, theta, eta }, state, cfg) {
      const { d, seq_len: s } = cfg, eps = cfg.eps as number;
      const dt = k.dtype, dd = d * d, W = state.ln_w!.data, B = state.ln_b!.data;
      const mS = alloc(dt, (s + 1) * dd), sS = alloc(dt, (s + 1) * dd);
      mS.set(state.M!.data);
      sS.set(state.S!.data);
      const u = alloc(dt, s * d), xh = alloc(dt, s * d), sig = alloc(dt, s), oh = alloc(dt, s * d), osig = alloc(dt, s);
      const y = alloc(dt, s * d), z = accBuffer(d), g = accBuffer(d), ov = accBuffer(d);
      for (let t = 0; t < s; t++) {
        const o = t * d, mt = t * dd, mn = (t + 1) * dd;
        const a = alpha!.data[t]!, th = theta!.data[t]!, et = eta!.data[t]!;
        K.matvec(mS, mt, d, d, k.data, o, z, 0);
        sig[t] = lnReconGrad(z, { W, B, k: k.data, v: v.data, o, d }, eps, xh, u, g);
        // S_{t+1} = η S_t − θ · 2 u kᵀ ;  M_{t+1} = (1 − α) M_t + S_{t+1}
        for (let i = 0; i < d; i++) {
          const c = -2 * th * u[o + i]!;
          for (let j = 0; j < d; j++) sS[mn + i * d + j] = et * sS[mt + i * d + j]! + c * k.data[o + j]!;
        }
        for (let i = 0; i < dd; i++) mS[mn + i] = (1 - a) * mS[mt + i]! + sS[mn + i]!;
        K.matvec(mS, mn, d, d, q.data, o, ov, 0);
        osig[t] = outLn(ov, W, B, d, eps, oh, y, o);
      }
      const T = (data: Data, shape: number[]) => new Tensor(dt, shape, data);
      return {
        y: T(y, [s, d]),
        finalState: { M: T(mS.slice(s * dd), [d, d]), S: T(sS.slice(s * dd), [d, d]), ln_w: T(W.slice(), [d]), ln_b: T(B.slice(), [d]) },
        saved: {
          mStates: T(mS, [s + 1, d, d]), sStates: T(sS, [s + 1, d, d]), u: T(u, [s, d]), xh: T(xh, [s, d]), sig: T(sig, [s]),
          oh: T(oh, [s, d]), osig: T(osig, [s]), lnW: T(rows(dt, W, s), [s, d]), lnB: T(rows(dt, B, s), [s, d]),
        },
      };
    },
    backward(sv, { k, v, q, alpha, theta, eta }, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg;
      const dt = k.dtype, dd = d * d;
      const mS = sv.mStates!.data, sS = sv.sStates!.data, u = sv.u!.data, xh = sv.xh!.data;
      const sig = sv.sig!.data, oh = sv.oh!.data, osig = sv.osig!.data, W = sv.lnW!.data, B = sv.lnB!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s), deta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd), E = adjointFrom(dFinal, "S", dd); // ∂L/∂M_{t+1}, ∂L/∂S_{t+1}
      const dW = adjointFrom(dFinal, "ln_w", d), dB = adjointFrom(dFinal, "ln_b", d);
      const tmp = accBuffer(d), gw = accBuffer(d), dO = accBuffer(d), Ek = accBuffer(d), du = accBuffer(d);
      const dz = accBuffer(d), sc = lnReconScratch(d);
      for (let t = s - 1; t >= 0; t--) {
        const o = t * d, mt = t * dd, mn = (t + 1) * dd;
        const a = alpha!.data[t]!, th = theta!.data[t]!, et = eta!.data[t]!;
        // y_t = o_t + γ ⊙ N(o_t) + β ;  o_t = M_{t+1} q_t
        outLnVjp(oh, o, osig[t]!, dy.data, W, d, gw, dW, dB, dO);
        K.addOuter(D, 0, d, d, 1, dO, 0, q.data, o);
        K.matTvec(mS, mn, d, d, dO, 0, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        // M_{t+1} = (1 − α) M_t + S_{t+1}
        dalpha[t] = -K.frob(D, 0, mS, mt, dd);
        for (let i = 0; i < dd; i++) E[i]! += D[i]!;
        // S_{t+1} = η S_t − 2θ u kᵀ
        deta[t] = K.frob(sS, mt, E, 0, dd);
        K.matvec(E, 0, d, d, k.data, o, Ek, 0);
        dtheta[t] = -2 * K.dot(u, Ek, d, o, 0);
        for (let i = 0; i < d; i++) du[i] = -2 * th * Ek[i]!;
        K.matTvec(E, 0, d, d, u, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -2 * th * tmp[j]!;
        // u = Nᵀ(z; γ ⊙ r), its second-order term included; z = M_t k_t
        lnReconVjp({ W, B, k: k.data, v: v.data, o, d }, xh, sig[t]!, u, du, sc, dz, dW, dB, dv, dk);
        K.matTvec(mS, mt, d, d, dz, 0, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j]! += tmp[j]!;
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
        K.addOuter(D, 0, d, d, 1, dz, 0, k.data, o);
        for (let i = 0; i < dd; i++) E[i]! *= et;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta), deta: new Tensor(dt, [s], deta),
        dState0: {
          M: gradTensor(dt, [d, d], D), S: gradTensor(dt, [d, d], E),
          ln_w: gradTensor(dt, [d], dW), ln_b: gradTensor(dt, [d], dB),
        },
      };
    },
  },
  frozen: lnOutFrozenRead(false),
  // d = 2: N(z) is ±1 up to ε, so every LayerNorm gradient vanishes; s = 1 from S_0 = 0: η never acts.
  checkMinimums: { d: 3, seq_len: 2 },
  stepLocalState: ["S"],
  invariants: [
    {
      name: "the update is the gradient of the stated objective",
      spec: "docs/spec/ttt.md#titans-linear-objective: with α = η = 0, θ = 1, one token moves M by −∇ℓ at M_0",
      check: (dtype, seed) => updateIsObjectiveGradient(dtype, seed),
    },
  ],
};

/**
 * C8: one token with α = η = 0, θ = 1 from a random M_0 moves M by minus the central-difference
 * gradient of ℓ = ‖γ ⊙ N(M k) + β − (v − k)‖² at M_0 (ℓ from lnReconLoss, not from the update).
 */
function updateIsObjectiveGradient(dtype: DType, seed: number): string | null {
  const d = 4, eps = 1e-5, h = 1e-5;
  const rng = new Rng(seed);
  const cfg: RuleConfig = { d, seq_len: 1, eps };
  const k = uniformTensor(dtype, [1, d], rng, -1, 1), v = uniformTensor(dtype, [1, d], rng, -1, 1);
  const q = uniformTensor(dtype, [1, d], rng, -1, 1);
  const alpha = zeros(dtype, [1]), eta = zeros(dtype, [1]), theta = zeros(dtype, [1]);
  theta.data.fill(1);
  const state: State = {
    M: uniformTensor(dtype, [d, d], rng, -0.5, 0.5), S: uniformTensor(dtype, [d, d], rng, -0.5, 0.5),
    ln_w: uniformTensor(dtype, [d], rng, 0.5, 1.5), ln_b: uniformTensor(dtype, [d], rng, -0.5, 0.5),
  };
  const fin = titans_linear.inner.forward({ k, v, q, x: k, alpha, theta, eta }, state, cfg).finalState;
  const M = Float64Array.from(state.M!.data), z = new Float64Array(d);
  const p = { W: Float64Array.from(state.ln_w!.data), B: Float64Array.from(state.ln_b!.data), k: Float64Array.from(k.data), v: Float64Array.from(v.data), o: 0, d };
  const L = () => {
    K.matvec(M, 0, d, d, p.k, 0, z, 0);
    return 2 * lnReconLoss(z, p, eps);
  };
  const tol = dtype === "f64" ? 1e-7 : 2e-3;
  for (let i = 0; i < d * d; i++) {
    const keep = M[i]!;
    M[i] = keep + h;
    const lp = L();
    M[i] = keep - h;
    const lm = L();
    M[i] = keep;
    const fd = (lp - lm) / (2 * h), step = state.M!.data[i]! - fin.M!.data[i]!;
    if (Math.abs(step - fd) > tol * Math.max(1, Math.abs(fd))) return `M[${i}]: update ${step} vs −∇ℓ by differences ${fd}`;
  }
  return null;
}
