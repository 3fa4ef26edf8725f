/**
 * The LayerNorm reconstruction objective of TTT-Linear and Titans-linear (docs/spec/ttt.md): LayerNorm
 * without affine N, the inner gradient u = ∂ℓ/∂z of ℓ = ½‖γ ⊙ N(z) + β − (v − k)‖², the VJP of u
 * (its second-order term included) and of the output LayerNorm with residual.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { gradTensor } from "./state-grad.ts";
import type { FrozenPair } from "./types.ts";

/** N(z) of the d entries of z at zo into xh at xo; returns σ = √(var z + ε) (biased variance). */
export function lnNormalize(z: Data, zo: number, d: number, eps: number, xh: Data, xo: number): number {
  let mu = 0;
  for (let i = 0; i < d; i++) mu += z[zo + i]!;
  mu /= d;
  let vr = 0;
  for (let i = 0; i < d; i++) vr += (z[zo + i]! - mu) ** 2;
  const sig = Math.sqrt(vr / d + eps);
  for (let i = 0; i < d; i++) xh[xo + i] = (z[zo + i]! - mu) / sig;
  return sig;
}

/** The VJP of N at the point with output xh, σ: out = (1/σ)(a − mean(a) − xh · mean(a ⊙ xh)). */
export function lnVjp(xh: Data, xo: number, sig: number, a: Data, ao: number, d: number, out: Data, oo: number): void {
  let ma = 0, max = 0;
  for (let i = 0; i < d; i++) {
    ma += a[ao + i]!;
    max += a[ao + i]! * xh[xo + i]!;
  }
  ma /= d;
  max /= d;
  for (let i = 0; i < d; i++) out[oo + i] = (a[ao + i]! - ma - xh[xo + i]! * max) / sig;
}

/** γ, β and token t's k, v (offset o): what the objective reads besides z. */
export interface LnReconInputs { readonly W: Data; readonly B: Data; readonly k: Data; readonly v: Data; readonly o: number; readonly d: number }

/** ℓ = ½‖γ ⊙ N(z) + β − (v − k)‖² for z (d entries at 0), the declared objective (docs/spec/ttt.md#ttt-objective). */
export function lnReconLoss(z: Data, { W, B, k, v, o, d }: LnReconInputs, eps: number): number {
  const xh = new Float64Array(d);
  lnNormalize(z, 0, d, eps, xh, 0);
  let l = 0;
  for (let i = 0; i < d; i++) l += (W[i]! * xh[i]! + B[i]! - (v[o + i]! - k[o + i]!)) ** 2;
  return l / 2;
}

/** u = ∂ℓ/∂z into u at o, N(z) into xh at o; g is d scratch entries. Returns σ. */
export function lnReconGrad(z: Data, p: LnReconInputs, eps: number, xh: Data, u: Data, g: Data): number {
  const { W, B, k, v, o, d } = p;
  const sig = lnNormalize(z, 0, d, eps, xh, o);
  for (let i = 0; i < d; i++) g[i] = W[i]! * (W[i]! * xh[o + i]! + B[i]! - v[o + i]! + k[o + i]!);
  lnVjp(xh, o, sig, g, 0, d, u, o);
  return sig;
}

export type LnReconScratch = ReturnType<typeof lnReconScratch>;
export function lnReconScratch(d: number) {
  const f = () => new Float64Array(d);
  return { dg: f(), r: f(), g: f(), ax: f() };
}

/**
 * The VJP of u = Nᵀ(z; γ ⊙ r), r = γ ⊙ x̂ + β − v + k, for the adjoint du (docs/spec/ttt.md#ttt-backward):
 * dz into dz (d entries at 0), dv[o..] = −δr, dk[o..] += δr, dW += r ⊙ δg + x̂ ⊙ δr, dB += δr.
 */
export function lnReconVjp(p: LnReconInputs, xh: Data, sig: number, u: Data, du: Data, sc: LnReconScratch,
  dz: Data, dW: Data, dB: Data, dv: Data, dk: Data): void {
  const { W, B, k, v, o, d } = p, { dg, r, g, ax } = sc;
  // the g path (N's Jacobian is symmetric) ...
  lnVjp(xh, o, sig, du, 0, d, dg, 0);
  let c = 0, mdx = 0, udu = 0;
  for (let i = 0; i < d; i++) {
    r[i] = W[i]! * xh[o + i]! + B[i]! - v[o + i]! + k[o + i]!;
    g[i] = W[i]! * r[i]!;
    c += g[i]! * xh[o + i]!;
    mdx += du[i]! * xh[o + i]!;
    udu += u[o + i]! * du[i]!;
  }
  c /= d;
  mdx /= d;
  for (let i = 0; i < d; i++) {
    const dr = W[i]! * dg[i]!;
    dW[i]! += r[i]! * dg[i]! + xh[o + i]! * dr;
    dB[i]! += dr;
    dv[o + i] = -dr;
    dk[o + i]! += dr;
    // ... then the second-order term: u's own dependence on x̂ (through c and the projection)
    ax[i] = W[i]! * dr - (c * du[i]! + mdx * g[i]!) / sig;
  }
  lnVjp(xh, o, sig, ax, 0, d, dz, 0);
  // and on σ: ∂σ/∂z = x̂ / d
  for (let i = 0; i < d; i++) dz[i]! -= (udu / (sig * d)) * xh[o + i]!;
}

/** y = o + γ ⊙ N(o) + β for o (d entries at 0) into y at yo, N(o) into oh at yo; returns σ_o. */
export function outLn(ov: Data, W: Data, B: Data, d: number, eps: number, oh: Data, y: Data, yo: number): number {
  const sg = lnNormalize(ov, 0, d, eps, oh, yo);
  for (let i = 0; i < d; i++) y[yo + i] = ov[i]! + W[i]! * oh[yo + i]! + B[i]!;
  return sg;
}

/** Its VJP: δo = dy + Nᵀ(o; γ ⊙ dy) into dO (d entries at 0); dW += dy ⊙ N(o), dB += dy; gw is scratch. */
export function outLnVjp(oh: Data, o: number, sig: number, dy: Data, W: Data, d: number, gw: Data, dW: Data, dB: Data, dO: Data): void {
  for (let i = 0; i < d; i++) {
    gw[i] = W[i]! * dy[o + i]!;
    dW[i]! += dy[o + i]! * oh[o + i]!;
    dB[i]! += dy[o + i]!;
  }
  lnVjp(oh, o, sig, gw, 0, d, dO, 0);
  for (let i = 0; i < d; i++) dO[i]! += dy[o + i]!;
}

/**
 * The frozen read of both rules (docs/spec/ttt.md#ttt-frozen): o_t = M q_t (+ M_b with `bias`),
 * y_t = o_t + γ ⊙ N(o_t) + β, and its VJP.
 */
export function lnOutFrozenRead(bias: boolean): FrozenPair<string> {
  const read = (M: Data, m: Data | null, q: Data, o: number, d: number, ov: Data) => {
    K.matvec(M, 0, d, d, q, o, ov, 0);
    if (m !== null) for (let i = 0; i < d; i++) ov[i]! += m[i]!;
  };
  return {
    saved: bias ? ["M", "M_b", "ln_w", "ln_b"] : ["M", "ln_w", "ln_b"],
    forward(q, state, cfg) {
      const { d, seq_len: s } = cfg, eps = cfg.eps as number;
      const W = state.ln_w!.data, B = state.ln_b!.data, m = bias ? state.M_b!.data : null;
      const y = alloc(q.dtype, s * d), ov = accBuffer(d), oh = accBuffer(s * d);
      for (let t = 0; t < s; t++) {
        read(state.M!.data, m, q.data, t * d, d, ov);
        outLn(ov, W, B, d, eps, oh, y, t * d);
      }
      const saved: Record<string, Tensor> = { M: state.M!, ln_w: state.ln_w!, ln_b: state.ln_b! };
      if (bias) saved.M_b = state.M_b!;
      return { y: new Tensor(q.dtype, [s, d], y), saved };
    },
    backward(sv, q, dy, cfg) {
      const { d, seq_len: s } = cfg, eps = cfg.eps as number, dt = q.dtype;
      const M = sv.M!.data, W = sv.ln_w!.data, m = bias ? sv.M_b!.data : null;
      const dq = alloc(dt, s * d), dM = accBuffer(d * d), dm = accBuffer(d), dW = accBuffer(d), dB = accBuffer(d);
      const ov = accBuffer(d), oh = accBuffer(s * d), y = accBuffer(s * d), gw = accBuffer(d), dO = accBuffer(d), tmp = accBuffer(d);
      for (let t = 0; t < s; t++) {
        const o = t * d;
        read(M, m, q.data, o, d, ov);
        const sg = outLn(ov, W, sv.ln_b!.data, d, eps, oh, y, o);
        outLnVjp(oh, o, sg, dy.data, W, d, gw, dW, dB, dO);
        K.matTvec(M, 0, d, d, dO, 0, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        K.addOuter(dM, 0, d, d, 1, dO, 0, q.data, o);
        for (let i = 0; i < d; i++) dm[i]! += dO[i]!;
      }
      const dState: Record<string, Tensor> = { M: gradTensor(dt, [d, d], dM), ln_w: gradTensor(dt, [d], dW), ln_b: gradTensor(dt, [d], dB) };
      if (bias) dState.M_b = gradTensor(dt, [d], dm);
      return { dq: new Tensor(dt, [s, d], dq), dState };
    },
  };
}
