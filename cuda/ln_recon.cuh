/*
 * Shared by the LayerNorm-reconstruction pairs (TTT-Linear, Titans-linear; docs/spec/ttt.md,
 * reference src/rules/ln-recon.ts): a token's shared memory, the inner gradient u = ∂ℓ/∂z of
 * ℓ = ½‖γ ⊙ N(z) + β − (v − k)‖², the output LayerNorm with residual y = o + γ ⊙ N(o) + β, and the
 * VJPs of both (the inner one with its second-order term). The O(d) LayerNorm work of a token is
 * done by thread 0 in index order (so no result depends on scheduling); the O(d²) work by rows or
 * columns in the rule's source. N(z), u, N(o) and σ are rounded to f32 where the reference saves them (D69).
 */
#pragma once

#include "walk.cuh"

namespace nlk::ln {

/** One token: k, v, q, γ, β, dy staged; z, o and the LayerNorm quantities; the backward's vectors. */
struct TokSmem {
  float *k, *v, *q, *W, *B, *dy, *xh, *u;
  acc_t *oh, *z, *o, *sig, *dO, *du, *dz, *dr, *red;
  /** Rounds N(o) and, for the VJPs, σ to f32 as the rules' saved tensors are (the frozen read keeps f64). */
  bool saved_f32 = true;
  __host__ __device__ TokSmem() {}
  __host__ __device__ TokSmem(Carver& c, int d, int nt)
      : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)), W(c.take<float>(d)), B(c.take<float>(d)), dy(c.take<float>(d)),
        xh(c.take<float>(d)), u(c.take<float>(d)), oh(c.take<acc_t>(d)), z(c.take<acc_t>(d)), o(c.take<acc_t>(d)), sig(c.take<acc_t>(2)),
        dO(c.take<acc_t>(d)), du(c.take<acc_t>(d)), dz(c.take<acc_t>(d)), dr(c.take<acc_t>(d)), red(c.take<acc_t>(3 * static_cast<size_t>(nt))) {}
  /** Token t's k, v, q and the state's γ, β (no barrier). */
  __device__ void load(const Seq& sq, int t, const float* kk, const float* vv, const float* qq, const float* lnw, const float* lnb) const {
    const size_t o = sq.vec(t);
    const int d = static_cast<int>(sq.d);
    load_vec(k, kk + o, d);
    load_vec(v, vv + o, d);
    load_vec(q, qq + o, d);
    load_vec(W, lnw, d);
    load_vec(B, lnb, d);
  }
};

/** N(x) into xh (rounded to its type), returns σ = √(var x + ε) (biased variance). Serial. */
template <class X>
__device__ inline acc_t normalize(const acc_t* x, int d, acc_t eps, X* xh, bool f32 = true) {
  acc_t mu = 0, vr = 0;
  for (int i = 0; i < d; i++) mu += x[i];
  mu /= d;
  for (int i = 0; i < d; i++) vr += (x[i] - mu) * (x[i] - mu);
  const acc_t sig = sqrt(vr / d + eps);
  for (int i = 0; i < d; i++) xh[i] = f32 ? static_cast<X>(static_cast<float>((x[i] - mu) / sig)) : static_cast<X>((x[i] - mu) / sig);
  return sig;
}

/** The VJP of N at (xh, σ): out = (a − mean(a) − xh · mean(a ⊙ xh)) / σ; a(i) gives entry i. Serial. */
template <class X, class A>
__device__ inline void norm_vjp(const X* xh, acc_t sig, A a, int d, acc_t* out) {
  acc_t ma = 0, max = 0;
  for (int i = 0; i < d; i++) {
    ma += a(i);
    max += a(i) * xh[i];
  }
  ma /= d;
  max /= d;
  for (int i = 0; i < d; i++) out[i] = (a(i) - ma - xh[i] * max) / sig;
}

/** σ as the VJPs read it: rounded to f32 where the rule saves it so (sig[0]: z's, sig[1]: o's). */
__device__ inline acc_t saved_sig(const TokSmem& sm, int i) { return sm.saved_f32 ? static_cast<acc_t>(static_cast<float>(sm.sig[i])) : sm.sig[i]; }

/** u = ∂ℓ/∂z at sm.z: N(z) into sm.xh, σ into sm.sig[0], u into sm.u (f32). Thread 0; barriers around it are the caller's. */
__device__ inline void inner_grad(const TokSmem& sm, int d, acc_t eps) {
  if (threadIdx.x != 0) return;
  sm.sig[0] = normalize(sm.z, d, eps, sm.xh);
  // g = γ ⊙ r, r = γ ⊙ x̂ + β − v + k; du scratch holds g
  for (int i = 0; i < d; i++)
    sm.du[i] = static_cast<acc_t>(sm.W[i]) * (static_cast<acc_t>(sm.W[i]) * sm.xh[i] + sm.B[i] - sm.v[i] + sm.k[i]);
  norm_vjp(sm.xh, sm.sig[0], [&](int i) { return sm.du[i]; }, d, sm.dz);
  for (int i = 0; i < d; i++) sm.u[i] = static_cast<float>(sm.dz[i]);
}

/** y = o + γ ⊙ N(o) + β at sm.o: N(o) into sm.oh, σ_o into sm.sig[1], y (global) when given. Thread 0. */
__device__ inline void out_ln(const TokSmem& sm, int d, acc_t eps, float* y) {
  if (threadIdx.x != 0) return;
  sm.sig[1] = normalize(sm.o, d, eps, sm.oh, sm.saved_f32);
  if (y != nullptr)
    for (int i = 0; i < d; i++) y[i] = static_cast<float>(sm.o[i] + static_cast<acc_t>(sm.W[i]) * sm.oh[i] + sm.B[i]);
}

/** Its VJP: dO = dy + Nᵀ(o; γ ⊙ dy) into sm.dO; dW += dy ⊙ N(o), dB += dy. Thread 0. */
__device__ inline void out_ln_vjp(const TokSmem& sm, int d, adj_t* dW, adj_t* dB) {
  if (threadIdx.x != 0) return;
  norm_vjp(sm.oh, saved_sig(sm, 1), [&](int i) { return static_cast<acc_t>(sm.W[i]) * sm.dy[i]; }, d, sm.dO);
  for (int i = 0; i < d; i++) {
    sm.dO[i] += sm.dy[i];
    dW[i] += static_cast<adj_t>(sm.dy[i]) * sm.oh[i];
    dB[i] += sm.dy[i];
  }
}

/**
 * The VJP of u = Nᵀ(z; γ ⊙ r) for the adjoint sm.du (docs/spec/ttt.md#ttt-backward): dz into sm.dz,
 * δr into sm.dr (dk receives +δr, dv = −δr, written here to dv), dW += r ⊙ δg + x̂ ⊙ δr, dB += δr.
 * Thread 0; it uses sm.o as scratch (the caller has read o).
 */
__device__ inline void recon_vjp(const TokSmem& sm, int d, adj_t* dW, adj_t* dB, float* dv) {
  if (threadIdx.x != 0) return;
  const float* xh = sm.xh;
  const acc_t sig = saved_sig(sm, 0);
  acc_t* dg = sm.o;
  // the g path (N's Jacobian is symmetric)
  norm_vjp(xh, sig, [&](int i) { return sm.du[i]; }, d, dg);
  acc_t c = 0, mdx = 0, udu = 0;
  for (int i = 0; i < d; i++) {
    const acc_t r = static_cast<acc_t>(sm.W[i]) * xh[i] + sm.B[i] - sm.v[i] + sm.k[i];
    c += sm.W[i] * r * xh[i];
    mdx += sm.du[i] * xh[i];
    udu += static_cast<acc_t>(sm.u[i]) * sm.du[i];
  }
  c /= d;
  mdx /= d;
  for (int i = 0; i < d; i++) {
    const acc_t r = static_cast<acc_t>(sm.W[i]) * xh[i] + sm.B[i] - sm.v[i] + sm.k[i], g = sm.W[i] * r;
    const acc_t dr = sm.W[i] * dg[i];
    dW[i] += r * dg[i] + xh[i] * dr;
    dB[i] += dr;
    dv[i] = static_cast<float>(-dr);
    sm.dr[i] = dr;
    // the second-order term: u's own dependence on x̂ (through c and the projection); ax into dg
    dg[i] = sm.W[i] * dr - (c * sm.du[i] + mdx * g) / sig;
  }
  norm_vjp(xh, sig, [&](int i) { return dg[i]; }, d, sm.dz);
  // and on σ: ∂σ/∂z = x̂ / d
  for (int i = 0; i < d; i++) sm.dz[i] -= (udu / (sig * d)) * xh[i];
}

/** The walk's workspace of these rules: the state tensors of `size` (their adjoints alike), no record. */
template <int NS>
struct Ws : WalkWs<NS, NS> {
  __host__ __device__ Ws(Carver& c, const Shape& s, int C, const size_t (&size)[NS]) : WalkWs<NS, NS>(c, s, C, size, size, 0) {}
};

}  // namespace nlk::ln
