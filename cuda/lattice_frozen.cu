/*
 * Frozen read of Lattice OSR, ABI v2 (docs/spec/miras-compression.md#lattice-frozen,
 * docs/spec/decisions.md#d3; reference src/rules/lattice.ts latticeFrozen): on a fixed S [m, d],
 *   w_t = softmax(S q_t) ;  y_t = Σ_i w_i S[i]
 * and its VJP, dρ_i = w_i (S[i]·dy_t − Σ_i' w_i' S[i']·dy_t), dq_t = Σ_i dρ_i S[i],
 *   dS[i] = Σ_t (w_ti dy_t + dρ_ti q_t)   (in token order).
 * One block per sequence (b, h). Tokens are independent: a thread owns a token for the read and
 * for dq, with its m slot products in the workspace; after a barrier a thread owns elements of dS.
 * The backward recomputes w with the forward's arithmetic (lattice.cuh), so the workspace is scratch.
 */
#include "lattice.cuh"

namespace {

using nlk::slots::dot_row;

/** Scratch of every sequence's tokens: ρ (then dρ) in f64 and the read weights w in f32. */
struct FrozenWs {
  size_t tm;
  acc_t* rho;  // [seqs][T][m]
  float* w;    // [seqs][T][m]
  __host__ __device__ FrozenWs(nlk::Carver& c, const nlk::Shape& s, int m) : tm(static_cast<size_t>(s.T) * m) {
    rho = c.take<acc_t>(static_cast<size_t>(s.seqs()) * tm);
    w = c.take<float>(static_cast<size_t>(s.seqs()) * tm);
  }
};

/**
 * Token t's read weights at S into w (ρ into rho). One body (NLK_NOINLINE) for the forward and the
 * backward, so the backward's recomputed w are the forward's bits on either build.
 */
NLK_NOINLINE __device__ void weights(const float* S, const float* q, int m, int d, acc_t* rho, float* w) {
  for (int i = 0; i < m; i++) rho[i] = dot_row(S + static_cast<size_t>(i) * d, q, d);
  nlk::slots::softmax_weights(rho, m, w);
}

__global__ void lattice_frozen_read_kernel(nlk::Shape s, int m, const float* __restrict__ Q, const float* __restrict__ Sall,
                                           float* __restrict__ Y, unsigned char* wsp) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  nlk::Carver c(wsp);
  const FrozenWs ws(c, s, m);
  const float* S = Sall + sq.state(static_cast<size_t>(m) * d);
  for (int t = threadIdx.x; t < s.T; t += blockDim.x) {
    const size_t r = sq.n * ws.tm + static_cast<size_t>(t) * m;
    weights(S, Q + sq.vec(t), m, d, ws.rho + r, ws.w + r);
    for (int j = 0; j < d; j++) Y[sq.vec(t) + j] = nlk::slots::read_col(S, ws.w + r, m, d, j);
  }
}

/** dq per token, then dS per element; dy NULL = zero (both gradients are then exactly zero). */
__global__ void lattice_frozen_vjp_kernel(nlk::Shape s, int m, const float* __restrict__ Q, const float* __restrict__ Sall,
                                          const float* __restrict__ DY, float* __restrict__ DQ, float* __restrict__ DS,
                                          unsigned char* wsp) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  const size_t md = static_cast<size_t>(m) * d;
  nlk::Carver c(wsp);
  const FrozenWs ws(c, s, m);
  const float* S = Sall + sq.state(md);
  float* dS = DS + sq.state(md);
  if (DY == nullptr) {
    for (int t = threadIdx.x; t < s.T; t += blockDim.x)
      for (int j = 0; j < d; j++) DQ[sq.vec(t) + j] = 0.0f;
    for (size_t e = threadIdx.x; e < md; e += blockDim.x) dS[e] = 0.0f;
    return;
  }
  for (int t = threadIdx.x; t < s.T; t += blockDim.x) {
    const size_t r = sq.n * ws.tm + static_cast<size_t>(t) * m, o = sq.vec(t);
    acc_t* drho = ws.rho + r;
    const float* w = ws.w + r;
    weights(S, Q + o, m, d, drho, ws.w + r);
    acc_t wdw = 0;
    for (int i = 0; i < m; i++) {
      const acc_t dw = dot_row(S + static_cast<size_t>(i) * d, DY + o, d);
      drho[i] = dw;
      wdw += static_cast<acc_t>(w[i]) * dw;
    }
    for (int i = 0; i < m; i++) drho[i] = w[i] * (drho[i] - wdw);
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int i = 0; i < m; i++) acc += drho[i] * S[static_cast<size_t>(i) * d + j];
      DQ[o + j] = static_cast<float>(acc);
    }
  }
  __syncthreads();  // every token's w and dρ are in the workspace
  for (size_t e = threadIdx.x; e < md; e += blockDim.x) {
    const size_t i = e / d, j = e % d;
    acc_t acc = 0;
    for (int t = 0; t < s.T; t++) {
      const size_t r = sq.n * ws.tm + static_cast<size_t>(t) * m + i, o = sq.vec(t);
      acc += ws.w[r] * static_cast<acc_t>(DY[o + j]) + ws.rho[r] * Q[o + j];
    }
    dS[e] = static_cast<float>(acc);
  }
}

}  // namespace

// ── launchers (the contract of cuda/gen/nlk_rules.cuh) ─────────────────────────────────────

namespace nlk::lattice {

int frozen_workspace_bytes(const Shape& shape, const Hyper& hyper, size_t* bytes) {
  Carver c(nullptr);
  const FrozenWs ws(c, shape, hyper.m_slots);
  (void)ws;
  *bytes = c.off;
  return NLK_OK;
}

int frozen_forward(const FrozenForwardArgs& a) {
  NLK_LAUNCH(lattice_frozen_read_kernel, a.shape.seqs(), threads_for(a.shape.T), 0)(a.shape, a.hyper.m_slots, a.q, a.state.S, a.y, a.ws);
  return launch_status();
}

int frozen_backward(const FrozenBackwardArgs& a) {
  const size_t md = static_cast<size_t>(a.hyper.m_slots) * a.shape.d;
  const int work = md > static_cast<size_t>(a.shape.T) ? static_cast<int>(md < 4096 ? md : 4096) : a.shape.T;
  NLK_LAUNCH(lattice_frozen_vjp_kernel, a.shape.seqs(), threads_for(work), 0)
  (a.shape, a.hyper.m_slots, a.q, a.state.S, a.dy, a.dq, a.dstate.S, a.ws);
  return launch_status();
}

}  // namespace nlk::lattice

#include "gen/lattice_frozen.inc"
