/**
 * TTT-Linear (docs/spec/ttt.md#ttt-linear): a linear memory z = M k + m trained inside the sequence on
 * the LayerNorm reconstruction loss, mini-batch gradient descent with the gradient taken at the
 * start of each mini-batch of C tokens (C = 1: the per-token rule), read after write through an
 * output LayerNorm with residual.
 *   ℓ(M, m; k, v) = ½‖γ ⊙ N(M k + m) + β − (v − k)‖²          (N: LayerNorm without affine, ε)
 *   u_s = ∂ℓ/∂z at the mini-batch's first state (M_0, m_0)
 *   M_{t+1} = M_0 − θ_t Σ_{s ≤ t} u_s k_sᵀ ;  m_{t+1} = m_0 − θ_t Σ_{s ≤ t} u_s   (s, t in the mini-batch)
 *   o_t = M_{t+1} q_t + m_{t+1} ;  y_t = o_t + γ ⊙ N(o_t) + β
 * γ, β (ln_w, ln_b) travel in the state unchanged (docs/spec/decisions.md#ttt-ln-state).
 * Frozen read: y_t = LN-residual of M q_t + m (docs/spec/ttt.md#ttt-frozen).
 */
import { accBuffer } from "../precision.ts";
import { Rng, uniformTensor } from "../rng.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros, type Data, type DType } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { lnOutFrozenRead, lnReconGrad, lnReconLoss, lnReconScratch, lnReconVjp, outLn, outLnVjp } from "./ln-recon.ts";
import type { InnerGrads, InnerInputs, Named, RuleConfig, RuleDecl, State } from "./types.ts";

/**
 * The declared inner objective ℓ(M, m; k, v) = ½‖γ ⊙ N(M k + m) + β − (v − k)‖² of token t (offset o),
 * written apart from the update so C8 can difference it (docs/spec/ttt.md#ttt-objective).
 */
export function tttInnerLoss(M: Data, m: Data, lnW: Data, lnB: Data, k: Data, v: Data, o: number, d: number, eps: number): number {
  const z = new Float64Array(d);
  K.matvec(M, 0, d, d, k, o, z, 0);
  for (let i = 0; i < d; i++) z[i]! += m[i]!;
  return lnReconLoss(z, { W: lnW, B: lnB, k, v, o, d }, eps);
}


/**
 * The rule's forward with mini-batches of C tokens (the rule itself is C = 1: with C > 1 the state
 * between tokens is not (M, m) alone, docs/spec/ttt.md#ttt-mini-batch).
 */
export function tttForward({ k, v, q, theta }: InnerInputs, state: State, cfg: RuleConfig, C: number): { y: Tensor; finalState: State; saved: Named<string> } {
  const { d, seq_len: s } = cfg, eps = cfg.eps as number;
  const dt = k.dtype, dd = d * d, W = state.ln_w!.data, B = state.ln_b!.data;
  const mS = alloc(dt, (s + 1) * dd), bS = alloc(dt, (s + 1) * d);
  mS.set(state.M!.data);
  bS.set(state.M_b!.data);
  const A = alloc(dt, s * dd), a = alloc(dt, s * d), u = alloc(dt, s * d), xh = alloc(dt, s * d), sig = alloc(dt, s);
  const oh = alloc(dt, s * d), osig = alloc(dt, s), y = alloc(dt, s * d);
  const z = accBuffer(d), g = accBuffer(d), accA = accBuffer(dd), acca = accBuffer(d), ov = accBuffer(d);
  for (let t0 = 0; t0 < s; t0 += C) {
    const t1 = Math.min(t0 + C, s), m0 = t0 * dd, b0 = t0 * d;
    accA.fill(0);
    acca.fill(0);
    for (let t = t0; t < t1; t++) {
      const o = t * d, th = theta!.data[t]!;
      // u_t = ∂ℓ/∂z at the mini-batch's first state: the LayerNorm backward of g = γ ⊙ r
      K.matvec(mS, m0, d, d, k.data, o, z, 0);
      for (let i = 0; i < d; i++) z[i]! += bS[b0 + i]!;
      sig[t] = lnReconGrad(z, { W, B, k: k.data, v: v.data, o, d }, eps, xh, u, g);
      K.addOuter(accA, 0, d, d, 1, u, o, k.data, o);
      for (let i = 0; i < d; i++) acca[i]! += u[o + i]!;
      A.set(accA, t * dd);
      a.set(acca, o);
      for (let i = 0; i < dd; i++) mS[(t + 1) * dd + i] = mS[m0 + i]! - th * accA[i]!;
      for (let i = 0; i < d; i++) bS[(t + 1) * d + i] = bS[b0 + i]! - th * acca[i]!;
      // read after write, then the output LayerNorm with residual
      K.matvec(mS, (t + 1) * dd, d, d, q.data, o, ov, 0);
      for (let i = 0; i < d; i++) ov[i]! += bS[(t + 1) * d + i]!;
      osig[t] = outLn(ov, W, B, d, eps, oh, y, o);
    }
  }
  const T = (data: Data, shape: number[]) => new Tensor(dt, shape, data);
  return {
    y: T(y, [s, d]),
    finalState: {
      M: T(mS.slice(s * dd), [d, d]), M_b: T(bS.slice(s * d), [d]),
      ln_w: T(W.slice(), [d]), ln_b: T(B.slice(), [d]),
    },
    saved: {
      mStates: T(mS, [s + 1, d, d]), bStates: T(bS, [s + 1, d]), A: T(A, [s, d, d]), a: T(a, [s, d]),
      u: T(u, [s, d]), xh: T(xh, [s, d]), sig: T(sig, [s]), oh: T(oh, [s, d]), osig: T(osig, [s]),
      lnW: T(rows(dt, W, s), [s, d]), lnB: T(rows(dt, B, s), [s, d]),
    },
  };
}

/** γ or β once per token: what a checkpointed stretch of tokens saves must be per token. */
function rows(dt: DType, x: Data, s: number): Data {
  const out = alloc(dt, s * x.length);
  for (let t = 0; t < s; t++) out.set(x, t * x.length);
  return out;
}

/** The exact backward of tttForward (docs/spec/ttt.md#ttt-backward). */
export function tttBackward(sv: Readonly<Record<string, Tensor>>, { k, v, q, theta }: InnerInputs, dy: Tensor, cfg: RuleConfig,
  C: number, dFinal?: State): InnerGrads {
  const { d, seq_len: s } = cfg;
  const dt = k.dtype, dd = d * d;
  const mS = sv.mStates!.data, A = sv.A!.data, a = sv.a!.data, u = sv.u!.data, xh = sv.xh!.data;
  const sig = sv.sig!.data, oh = sv.oh!.data, osig = sv.osig!.data;
  const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d), dtheta = alloc(dt, s);
  const DM = adjointFrom(dFinal, "M", dd), Dm = adjointFrom(dFinal, "M_b", d);
  const dW = adjointFrom(dFinal, "ln_w", d), dB = adjointFrom(dFinal, "ln_b", d);
  const W = sv.lnW!.data, B = sv.lnB!.data;
  const RM = accBuffer(dd), Rm = accBuffer(d), EM = accBuffer(dd), Em = accBuffer(d);
  const tmp = accBuffer(d), gw = accBuffer(d), dO = accBuffer(d), du = accBuffer(d);
  const dz = accBuffer(d), sc = lnReconScratch(d);
  const start = Math.floor((s - 1) / C) * C;
  for (let t0 = start; t0 >= 0; t0 -= C) {
    const t1 = Math.min(t0 + C, s), m0 = t0 * dd;
    // EM, Em: the adjoint of the last state of the mini-batch (the caller's), which reads only A_{t1−1}
    EM.set(DM);
    Em.set(Dm);
    RM.fill(0);
    Rm.fill(0);
    for (let t = t1 - 1; t >= t0; t--) {
      const o = t * d, th = theta!.data[t]!, last = t === t1 - 1;
      // y_t = o_t + γ ⊙ N(o_t) + β
      outLnVjp(oh, o, osig[t]!, dy.data, W, d, gw, dW, dB, dO);
      // o_t = M_{t+1} q_t + m_{t+1}
      K.matTvec(mS, (t + 1) * dd, d, d, dO, 0, tmp, 0);
      for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
      // M_{t+1} = M_0 − θ_t A_t: dθ_t = −⟨∂L/∂M_{t+1}, A_t⟩ − ⟨∂L/∂m_{t+1}, a_t⟩, ∂L/∂M_{t+1} = dO q_tᵀ (+ EM at the last)
      K.matvec(A, t * dd, d, d, q.data, o, tmp, 0);
      let dth = -K.dot(dO, tmp, d) - K.dot(dO, a, d, 0, o);
      if (last) dth += -K.frob(EM, 0, A, t * dd, dd) - K.dot(Em, a, d, 0, o);
      dtheta[t] = dth;
      // ∂L/∂A_t = −θ_t ∂L/∂M_{t+1}, summed over t' ≥ t into RM (A_t' holds u_t k_tᵀ for t' ≥ t)
      if (last) {
        for (let i = 0; i < dd; i++) RM[i]! -= th * EM[i]!;
        for (let i = 0; i < d; i++) Rm[i]! -= th * Em[i]!;
      }
      K.addOuter(RM, 0, d, d, -th, dO, 0, q.data, o);
      for (let i = 0; i < d; i++) Rm[i]! -= th * dO[i]!;
      // M_0 receives ∂L/∂M_{t+1} itself
      K.addOuter(DM, 0, d, d, 1, dO, 0, q.data, o);
      for (let i = 0; i < d; i++) Dm[i]! += dO[i]!;
      // u_t kᵀ: du = RM k_t + Rm, dk += RMᵀ u_t
      K.matvec(RM, 0, d, d, k.data, o, du, 0);
      for (let i = 0; i < d; i++) du[i]! += Rm[i]!;
      K.matTvec(RM, 0, d, d, u, o, tmp, 0);
      for (let j = 0; j < d; j++) dk[o + j] = tmp[j]!;
      // u = Nᵀ(z; γ ⊙ r), its second-order term included
      lnReconVjp({ W, B, k: k.data, v: v.data, o, d }, xh, sig[t]!, u, du, sc, dz, dW, dB, dv, dk);
      // z = M_0 k + m_0
      K.matTvec(mS, m0, d, d, dz, 0, tmp, 0);
      for (let j = 0; j < d; j++) dk[o + j]! += tmp[j]!;
      K.addOuter(DM, 0, d, d, 1, dz, 0, k.data, o);
      for (let i = 0; i < d; i++) Dm[i]! += dz[i]!;
    }
  }
  return {
    dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
    dtheta: new Tensor(dt, [s], dtheta),
    dState0: {
      M: gradTensor(dt, [d, d], DM), M_b: gradTensor(dt, [d], Dm),
      ln_w: gradTensor(dt, [d], dW), ln_b: gradTensor(dt, [d], dB),
    },
  };
}

export const ttt_linear: RuleDecl<"ttt_linear"> = {
  key: "ttt_linear",
  sheet: "docs/spec/ttt.md#ttt-linear",
  hyper: {
    eps: {
      kind: "real", default: 1e-6, min: 0, max: 1, sample: [1e-6, 1e-2],
      doc: "ε under the square root of both LayerNorms",
    },
  },
  projection: "memory",
  gates: ["theta"],
  normalizeKQ: false,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d], M_b: [d], ln_w: [d], ln_b: [d] }),
  // M_0 = I, not 0: from M = 0, m = 0 every z is 0, σ = √ε and the first step is O(1/√ε)
  // (docs/spec/decisions.md#ttt-init); γ = 1, β = 0 as LayerNorm starts.
  init: ({ d }, dtype) => {
    const M = zeros(dtype, [d, d]), w = zeros(dtype, [d]);
    for (let i = 0; i < d; i++) M.data[i * d + i] = 1;
    w.data.fill(1);
    return { M, M_b: zeros(dtype, [d]), ln_w: w, ln_b: zeros(dtype, [d]) };
  },
  randomState: ({ d }, dtype, rnd) => {
    const t = (shape: number[], f: () => number) => {
      const x = new Tensor(dtype, shape);
      for (let i = 0; i < x.size; i++) x.data[i] = f();
      return x;
    };
    return {
      M: t([d, d], () => (rnd() - 0.5) / Math.sqrt(d)), M_b: t([d], () => rnd() - 0.5),
      ln_w: t([d], () => 0.5 + rnd()), ln_b: t([d], () => rnd() - 0.5),
    };
  },
  inner: {
    saved: ["mStates", "bStates", "A", "a", "u", "xh", "sig", "oh", "osig", "lnW", "lnB"],
    forward: (inp, state, cfg) => tttForward(inp, state, cfg, 1),
    backward: (saved, inp, dy, cfg, dFinal) => tttBackward(saved, inp, dy, cfg, 1, dFinal),
  },
  frozen: lnOutFrozenRead(true),
  // d = 2: N(z) is ±1 up to ε, so every LayerNorm gradient vanishes; s = 1 reads only its own write.
  checkMinimums: { d: 3, seq_len: 2 },
  invariants: [
    {
      name: "the update is the gradient of the stated objective",
      spec: "docs/spec/ttt.md#ttt-objective: with θ = 1, a mini-batch moves (M, m) by −Σ_s ∇ℓ_s at its first state",
      check: (dtype, seed) => updateIsObjectiveGradient(dtype, seed),
    },
  ],
};

/**
 * C8: one mini-batch of C tokens with θ = 1 from a random state moves M and m by minus the
 * central-difference gradient of Σ_s ℓ_s at that state (ℓ from tttInnerLoss, not from the update).
 */
function updateIsObjectiveGradient(dtype: DType, seed: number): string | null {
  const d = 4, C = 3, eps = 1e-5, h = 1e-5;
  const rng = new Rng(seed);
  const cfg: RuleConfig = { d, seq_len: C, eps };
  const k = uniformTensor(dtype, [C, d], rng, -1, 1), v = uniformTensor(dtype, [C, d], rng, -1, 1);
  const q = uniformTensor(dtype, [C, d], rng, -1, 1), theta = zeros(dtype, [C]);
  theta.data.fill(1);
  const state: State = {
    M: uniformTensor(dtype, [d, d], rng, -0.5, 0.5), M_b: uniformTensor(dtype, [d], rng, -0.5, 0.5),
    ln_w: uniformTensor(dtype, [d], rng, 0.5, 1.5), ln_b: uniformTensor(dtype, [d], rng, -0.5, 0.5),
  };
  const inp: InnerInputs = { k, v, q, x: k, theta };
  const fin = tttForward(inp, state, cfg, C).finalState;
  const M = Float64Array.from(state.M!.data), m = Float64Array.from(state.M_b!.data);
  const kd = Float64Array.from(k.data), vd = Float64Array.from(v.data);
  const W = Float64Array.from(state.ln_w!.data), B = Float64Array.from(state.ln_b!.data);
  const L = () => {
    let l = 0;
    for (let t = 0; t < C; t++) l += tttInnerLoss(M, m, W, B, kd, vd, t * d, d, eps);
    return l;
  };
  const tol = dtype === "f64" ? 1e-7 : 2e-3;
  const probe = (x: Float64Array, got: Data, x0: Data, what: string): string | null => {
    for (let i = 0; i < x.length; i++) {
      const keep = x[i]!;
      x[i] = keep + h;
      const lp = L();
      x[i] = keep - h;
      const lm = L();
      x[i] = keep;
      const fd = (lp - lm) / (2 * h), step = x0[i]! - got[i]!;
      if (Math.abs(step - fd) > tol * Math.max(1, Math.abs(fd))) return `${what}[${i}]: update ${step} vs −∇ℓ by differences ${fd}`;
    }
    return null;
  };
  return probe(M, fin.M!.data, state.M!.data, "M") ?? probe(m, fin.M_b!.data, state.M_b!.data, "M_b");
}
