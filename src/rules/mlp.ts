/**
 * The 2-layer MLP memory shared by MONETA, YAAD and MEMORA (docs/spec/miras-compression.md#moneta, docs/spec/miras-compression.md#yaad, docs/spec/miras-compression.md#memora).
 * State W1 [dh, d], W2 [d, dh]. Per token, with the bias function g = φ(e) of the rule:
 *   a_t = W1_t k_t ; h_t = silu(a_t) ; e_t = W2_t h_t − v_t ; g_t = φ(e_t)
 *   G2_t = g_t h_tᵀ ; r_t = W2_tᵀ g_t ; u_t = r_t ⊙ silu'(a_t) ; G1_t = u_t k_tᵀ
 * Read: b_t = W1 q_t ; z_t = silu(b_t) ; y_t = W2 z_t.
 * G1 and G2 are never materialised: every use of them is an outer product or ⟨P, G⟩ = uᵀ P k.
 */
import * as K from "../numeric.ts";
import { initHash } from "../rng.ts";
import { Tensor, alloc, type DType, type Data } from "../tensor.ts";
import { gradTensor } from "./state-grad.ts";
import type { FrozenPair, HyperSpec, RuleConfig, StateSampler } from "./types.ts";

export const D_HIDDEN: HyperSpec = { kind: "int", default: 4, min: 1, max: 4096, sample: [1, 8], doc: "MLP width dh (d_hidden)" };

export function dHidden(cfg: RuleConfig): number {
  return Number(cfg.d_hidden);
}

export function mlpStateShapes(cfg: RuleConfig): Record<string, number[]> {
  const dh = dHidden(cfg);
  return { W1: [dh, cfg.d], W2: [cfg.d, dh] };
}

/**
 * §2.2 (MONETA, and YAAD by §3.2): W1[i] = c·(hash(i) − 0.5), c = 0.1·sqrt(2/(d+dh)), W2 = 0.
 * W1 is nonzero because W1 = W2 = 0 is a stationary point (D4).
 */
export function hashInit(cfg: RuleConfig, dtype: DType): Record<string, Tensor> {
  const { d } = cfg, dh = dHidden(cfg);
  const c = 0.1 * Math.sqrt(2 / (d + dh));
  const W1 = new Tensor(dtype, [dh, d]);
  for (let i = 0; i < W1.size; i++) W1.data[i] = c * (initHash(i) - 0.5);
  return { W1, W2: new Tensor(dtype, [d, dh]) };
}

/**
 * Random MONETA/YAAD states: entries U(−0.5, 0.5), W2's divided by √d. With the generated keys
 * (‖k‖ ≈ 1) a, b have std ≈ 0.3, where silu'' ≈ 0.5 is far from 0. W2 stays small in d because
 * the inner step on W1 has curvature ≈ θ φ'(e) silu'(a)² ‖W2[:, j]‖² ‖k‖² with
 * ‖W2[:, j]‖² = d·scale²/12: larger columns make the inner gradient descent at θ ≈ 0.8 overshoot
 * and the states blow up within a few tokens.
 */
export const randomMlpState: StateSampler = (cfg, dtype, rnd) => {
  const { d } = cfg, dh = dHidden(cfg);
  const W1 = new Tensor(dtype, [dh, d]), W2 = new Tensor(dtype, [d, dh]);
  for (let i = 0; i < W1.size; i++) W1.data[i] = rnd() - 0.5;
  for (let i = 0; i < W2.size; i++) W2.data[i] = (rnd() - 0.5) / Math.sqrt(d);
  return { W1, W2 };
};

/** The attentional bias of a rule, elementwise on the error: g = φ(e) and φ'(e). */
export interface Bias {
  phi(e: number): number;
  dphi(e: number): number;
}

/**
 * Per-call scratch. Forward quantities live in the run's dtype (an f32 run rounds them like an
 * f32 implementation would, and the backward's recomputation reproduces them bit for bit);
 * adjoints are f64 and stored into dtype outputs once per token.
 */
export class MlpScratch {
  readonly a: Data; readonly h: Data; readonly e: Data; readonly g: Data; readonly r: Data; readonly u: Data;
  readonly b: Data; readonly z: Data;
  /** P1 k, P1ᵀ u, P2 h, P2ᵀ g of the adjoint pair (P1, P2) handed to chainIn. */
  readonly p1k: Float64Array; readonly p1tu: Float64Array; readonly p2h: Float64Array; readonly p2tg: Float64Array;
  readonly dg: Float64Array; readonly dh: Float64Array; readonly du: Float64Array; readonly dr: Float64Array;
  readonly da: Float64Array; readonly de: Float64Array; readonly dz: Float64Array; readonly db: Float64Array;
  readonly tmpD: Float64Array; readonly tmpH: Float64Array;
  /** Per-token results: ∂L/∂k_t, ∂L/∂v_t (chainOut), ∂L/∂q_t (readVjp). */
  readonly dk: Float64Array; readonly dv: Float64Array; readonly dq: Float64Array;

  constructor(readonly dtype: DType, readonly d: number, readonly dH: number) {
    this.a = alloc(dtype, dH); this.h = alloc(dtype, dH); this.r = alloc(dtype, dH); this.u = alloc(dtype, dH);
    this.b = alloc(dtype, dH); this.z = alloc(dtype, dH);
    this.e = alloc(dtype, d); this.g = alloc(dtype, d);
    const fd = () => new Float64Array(d), fh = () => new Float64Array(dH);
    this.p1k = fh(); this.p1tu = fd(); this.p2h = fd(); this.p2tg = fh();
    this.dg = fd(); this.dh = fh(); this.du = fh(); this.dr = fh(); this.da = fh(); this.de = fd();
    this.dz = fh(); this.db = fh(); this.tmpD = fd(); this.tmpH = fh();
    this.dk = fd(); this.dv = fd(); this.dq = fd();
  }
}

/** The inner-gradient forward at (W1_t, W2_t) for token row o of k and v; fills a, h, e, g, r, u. */
export function innerGradient(sc: MlpScratch, W1: Data, o1: number, W2: Data, o2: number,
  k: Data, v: Data, o: number, bias: Bias): void {
  const { d, dH: dh, a, h, e, g, r, u } = sc;
  K.matvec(W1, o1, dh, d, k, o, a);
  for (let i = 0; i < dh; i++) h[i] = K.silu(a[i]!);
  K.matvec(W2, o2, d, dh, h, 0, e);
  for (let i = 0; i < d; i++) e[i]! -= v[o + i]!;
  for (let i = 0; i < d; i++) g[i] = bias.phi(e[i]!);
  K.matTvec(W2, o2, d, dh, g, 0, r);
  for (let i = 0; i < dh; i++) u[i] = r[i]! * K.siluPrime(a[i]!);
}

/** Read y[yo..] = W2 silu(W1 q[o..]); leaves b, z in the scratch. */
export function mlpRead(sc: MlpScratch, W1: Data, o1: number, W2: Data, o2: number,
  q: Data, o: number, y: Data, yo: number): void {
  const { d, dH: dh, b, z } = sc;
  K.matvec(W1, o1, dh, d, q, o, b);
  for (let i = 0; i < dh; i++) z[i] = K.silu(b[i]!);
  K.matvec(W2, o2, d, dh, z, 0, y, yo);
}

/**
 * VJP of the read (§2.6 / §2.8 "read"): D2 += dy zᵀ ; δz = W2ᵀ dy ; δb = δz ⊙ silu'(b) ;
 * D1 += δb qᵀ ; sc.dq = W1ᵀ δb. D1/D2 null when the caller needs no state gradient.
 */
export function readVjp(sc: MlpScratch, W1: Data, o1: number, W2: Data, o2: number,
  q: Data, dy: Data, o: number, D1: Float64Array | null, D2: Float64Array | null): void {
  const { d, dH: dh, b, z, dz, db } = sc;
  mlpRead(sc, W1, o1, W2, o2, q, o, sc.tmpD, 0);
  if (D2 !== null) K.addOuter(D2, 0, d, dh, 1, dy, o, z, 0);
  K.matTvec(W2, o2, d, dh, dy, o, dz);
  for (let i = 0; i < dh; i++) db[i] = dz[i]! * K.siluPrime(b[i]!);
  if (D1 !== null) K.addOuter(D1, 0, dh, d, 1, db, 0, q, o);
  K.matTvec(W1, o1, dh, d, db, 0, sc.dq);
}

/**
 * First half of the inner-gradient adjoint: the products of the adjoint pair (P1, P2) with the
 * saved vectors, taken before the caller overwrites P with the new state adjoint. They also give
 * ⟨P1, G1⟩ = uᵀ(P1 k) and ⟨P2, G2⟩ = gᵀ(P2 h) for dθ.
 */
export function chainIn(sc: MlpScratch, P1: Float64Array, P2: Float64Array, k: Data, o: number): void {
  const { d, dH: dh } = sc;
  K.matvec(P1, 0, dh, d, k, o, sc.p1k);
  K.matTvec(P1, 0, dh, d, sc.u, 0, sc.p1tu);
  K.matvec(P2, 0, d, dh, sc.h, 0, sc.p2h);
  K.matTvec(P2, 0, d, dh, sc.g, 0, sc.p2tg);
}

/** ⟨P1, G1⟩ + ⟨P2, G2⟩ after chainIn. */
export function innerGradDot(sc: MlpScratch): number {
  return K.dot(sc.u, sc.p1k, sc.dH) + K.dot(sc.g, sc.p2h, sc.d);
}

/**
 * Second half (§2.8 "inner-gradient chain"), with dG1 = c P1, dG2 = c P2 (c = −θ_t):
 *   δg = dG2 h ; δh = dG2ᵀ g ; δu = dG1 k ; dk = dG1ᵀ u
 *   δr = δu ⊙ silu'(a) ; δa = δu ⊙ r ⊙ silu''(a)      (the exact term, D2)
 *   δg += W2 δr ; D2 += g δrᵀ
 *   δe = δg ⊙ φ'(e) ; dv = −δe ; D2 += δe hᵀ ; δh += W2ᵀ δe
 *   δa += δh ⊙ silu'(a) ; D1 += δa kᵀ ; dk += W1ᵀ δa
 * Adds into D1, D2 (the adjoints of W1_t, W2_t); sets sc.dk, sc.dv.
 */
export function chainOut(sc: MlpScratch, c: number, W1: Data, o1: number, W2: Data, o2: number,
  k: Data, o: number, D1: Float64Array, D2: Float64Array, bias: Bias): void {
  const { d, dH: dh, a, h, e, g, r, dg, dh: dH_, du, dr, da, de, tmpD, tmpH } = sc;
  for (let i = 0; i < d; i++) dg[i] = c * sc.p2h[i]!;
  for (let i = 0; i < dh; i++) dH_[i] = c * sc.p2tg[i]!;
  for (let i = 0; i < dh; i++) du[i] = c * sc.p1k[i]!;
  for (let j = 0; j < d; j++) sc.dk[j] = c * sc.p1tu[j]!;
  for (let i = 0; i < dh; i++) {
    dr[i] = du[i]! * K.siluPrime(a[i]!);
    da[i] = du[i]! * r[i]! * K.siluSecond(a[i]!);
  }
  K.matvec(W2, o2, d, dh, dr, 0, tmpD);
  for (let i = 0; i < d; i++) dg[i]! += tmpD[i]!;
  K.addOuter(D2, 0, d, dh, 1, g, 0, dr, 0);
  for (let i = 0; i < d; i++) {
    de[i] = dg[i]! * bias.dphi(e[i]!);
    sc.dv[i] = -de[i]!;
  }
  K.addOuter(D2, 0, d, dh, 1, de, 0, h, 0);
  K.matTvec(W2, o2, d, dh, de, 0, tmpH);
  for (let i = 0; i < dh; i++) da[i]! += (dH_[i]! + tmpH[i]!) * K.siluPrime(a[i]!);
  K.addOuter(D1, 0, dh, d, 1, da, 0, k, o);
  K.matTvec(W1, o1, dh, d, da, 0, tmpD);
  for (let j = 0; j < d; j++) sc.dk[j]! += tmpD[j]!;
}

/** Frozen read y_t = W2 silu(W1 q_t) and its VJP dq_t = W1ᵀ((W2ᵀ dy_t) ⊙ silu'(W1 q_t)) (§2.6, §3.4, §4.4; D3). */
export const mlpFrozenRead: FrozenPair<"W1" | "W2"> = {
  saved: ["W1", "W2"],
  forward(q, state, cfg) {
    const { d, seq_len: s } = cfg;
    const W1 = state.W1!, W2 = state.W2!;
    const sc = new MlpScratch(q.dtype, d, dHidden(cfg));
    const y = alloc(q.dtype, s * d);
    for (let t = 0; t < s; t++) mlpRead(sc, W1.data, 0, W2.data, 0, q.data, t * d, y, t * d);
    return { y: new Tensor(q.dtype, [s, d], y), saved: { W1, W2 } };
  },
  backward({ W1, W2 }, q, dy, cfg) {
    const { d, seq_len: s } = cfg;
    const sc = new MlpScratch(q.dtype, d, dHidden(cfg));
    const dq = alloc(q.dtype, s * d);
    const dh = dHidden(cfg), D1 = new Float64Array(dh * d), D2 = new Float64Array(d * dh);
    for (let t = 0; t < s; t++) {
      readVjp(sc, W1!.data, 0, W2!.data, 0, q.data, dy.data, t * d, D1, D2);
      dq.set(sc.dq, t * d);
    }
    return {
      dq: new Tensor(q.dtype, [s, d], dq),
      dState: { W1: gradTensor(q.dtype, [dh, d], D1), W2: gradTensor(q.dtype, [d, dh], D2) },
    };
  },
};
