/*
 * Frozen read of Lattice OSR (docs/spec/miras-compression.md#lattice-frozen, docs/spec/decisions.md#d3; reference src/rules/lattice.ts
 * latticeFrozen): w_t = softmax(S q_t), y_t = Σ_i w_i S[i]; the VJP
 *   dρ_i = w_i (S[i]·dy_t − Σ_i' w_i' S[i']·dy_t) ;  dq_t = Σ_i dρ_i S[i]
 * A thread owns a token (tokens are independent): no barrier, and an m-row of shared scratch each.
 */
#include "common.cuh"

namespace {

__global__ void lattice_frozen_read_kernel(int s, int d, int m, const float* __restrict__ Q, const float* __restrict__ Sall,
                                           float* __restrict__ Y, float* __restrict__ readW) {
  const int b = blockIdx.x;
  const float* S = Sall + b * static_cast<size_t>(m) * d;
  acc_t* rho = nlk::thread_row(m);  // the thread's token's m slot products
  for (int t = threadIdx.x; t < s; t += blockDim.x) {
    const size_t o = (static_cast<size_t>(b) * s + t) * d, wo = (static_cast<size_t>(b) * s + t) * m;
    acc_t mx = -INFINITY, sum = 0;
    for (int i = 0; i < m; i++) {
      acc_t r = 0;
      for (int j = 0; j < d; j++) r += static_cast<acc_t>(S[i * d + j]) * Q[o + j];
      rho[i] = r;
      mx = r > mx ? r : mx;
    }
    for (int i = 0; i < m; i++) sum += exp(rho[i] - mx);
    for (int i = 0; i < m; i++) readW[wo + i] = static_cast<float>(exp(rho[i] - mx) / sum);
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int i = 0; i < m; i++) acc += static_cast<acc_t>(readW[wo + i]) * S[i * d + j];
      Y[o + j] = static_cast<float>(acc);
    }
  }
}

__global__ void lattice_frozen_vjp_kernel(int s, int d, int m, const float* __restrict__ Sall, const float* __restrict__ readW,
                                          const float* __restrict__ DY, float* __restrict__ DQ) {
  const int b = blockIdx.x;
  const float* S = Sall + b * static_cast<size_t>(m) * d;
  acc_t* drho = nlk::thread_row(m);
  for (int t = threadIdx.x; t < s; t += blockDim.x) {
    const size_t o = (static_cast<size_t>(b) * s + t) * d, wo = (static_cast<size_t>(b) * s + t) * m;
    acc_t wdw = 0;
    for (int i = 0; i < m; i++) {
      acc_t dw = 0;
      for (int j = 0; j < d; j++) dw += static_cast<acc_t>(S[i * d + j]) * DY[o + j];
      drho[i] = dw;
      wdw += static_cast<acc_t>(readW[wo + i]) * dw;
    }
    for (int i = 0; i < m; i++) drho[i] = readW[wo + i] * (drho[i] - wdw);
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int i = 0; i < m; i++) acc += drho[i] * S[i * d + j];
      DQ[o + j] = static_cast<float>(acc);
    }
  }
}

int check(int B, int s, int d, int m) {
  if (B < 1 || s < 1 || d < 1 || m < 1) return NLK_ERR_BAD_SIZE;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_lattice_frozen_forward(int B, int s, int d, int m_slots, int variant, const float* q, const float* S,
                                       float* y, float* readW) {
  if (int st = check(B, s, d, m_slots)) return st;
  if (variant < 0 || variant > 2) return NLK_ERR_BAD_HYPER;
  NLK_REQUIRE_PTRS(q, S, y, readW);
  const size_t sd = static_cast<size_t>(B) * s * d;
  nlk::Call call;
  const float *gq = call.in(q, sd), *gs = call.in(S, static_cast<size_t>(B) * m_slots * d);
  float *oy = call.out(y, sd), *ow = call.out(readW, static_cast<size_t>(B) * s * m_slots);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(s);
  call.start();
  NLK_LAUNCH(lattice_frozen_read_kernel, B, nt, static_cast<size_t>(nt) * m_slots * sizeof(acc_t))(s, d, m_slots, gq, gs, oy, ow);
  return call.finish();
}

NLK_API int nlk_lattice_frozen_backward(int B, int s, int d, int m_slots, int variant, const float* q, const float* S,
                                        const float* readW, const float* dy, float* dq) {
  if (int st = check(B, s, d, m_slots)) return st;
  if (variant < 0 || variant > 2) return NLK_ERR_BAD_HYPER;
  NLK_REQUIRE_PTRS(q, S, readW, dy, dq);
  const size_t sd = static_cast<size_t>(B) * s * d;
  nlk::Call call;
  const float *gs = call.in(S, static_cast<size_t>(B) * m_slots * d), *gw = call.in(readW, static_cast<size_t>(B) * s * m_slots),
              *gdy = call.in(dy, sd);
  float* odq = call.out(dq, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(s);
  call.start();
  NLK_LAUNCH(lattice_frozen_vjp_kernel, B, nt, static_cast<size_t>(nt) * m_slots * sizeof(acc_t))(s, d, m_slots, gs, gw, gdy, odq);
  return call.finish();
}

}  // extern "C"
