/*
 * Frozen read of Trellis (docs/spec/miras-compression.md#trellis-frozen, docs/spec/decisions.md#d3; reference src/rules/trellis.ts
 * trellisFrozen): r_t = S_K q_t, y_t = S_V nsilu(r_t); the VJP dq_t = S_Kᵀ nsilu'(r_t)ᵀ (S_Vᵀ dy_t).
 * A thread owns a token (tokens are independent); ĉ stays in f64 here, as in the reference.
 */
#include "trellis.cuh"

namespace {

__global__ void trellis_frozen_read_kernel(int s, int d, int dk, const float* __restrict__ Q, const float* __restrict__ SKall,
                                           const float* __restrict__ SVall, float* __restrict__ Y, float* __restrict__ R) {
  const int b = blockIdx.x;
  const size_t n = static_cast<size_t>(dk) * d;
  const float *SK = SKall + b * n, *SV = SVall + b * n;
  acc_t* ch = nlk::thread_row(dk);
  for (int t = threadIdx.x; t < s; t += blockDim.x) {
    const size_t o = (static_cast<size_t>(b) * s + t) * d, oc = (static_cast<size_t>(b) * s + t) * dk;
    for (int l = 0; l < dk; l++) {
      acc_t acc = 0;
      for (int j = 0; j < d; j++) acc += static_cast<acc_t>(SK[l * d + j]) * Q[o + j];
      R[oc + l] = static_cast<float>(acc);
    }
    const acc_t norm = nlk::silu_norm(R + oc, dk);
    const acc_t scale = norm <= nlk::kNsiluEps ? 0.0 : sqrt(static_cast<acc_t>(dk)) / norm;
    for (int l = 0; l < dk; l++) ch[l] = scale * nlk::silu<acc_t>(R[oc + l]);
    for (int i = 0; i < d; i++) {
      acc_t acc = 0;
      for (int l = 0; l < dk; l++) acc += static_cast<acc_t>(SV[i * dk + l]) * ch[l];
      Y[o + i] = static_cast<float>(acc);
    }
  }
}

__global__ void trellis_frozen_vjp_kernel(int s, int d, int dk, const float* __restrict__ SKall,
                                          const float* __restrict__ SVall, const float* __restrict__ R,
                                          const float* __restrict__ DY, float* __restrict__ DQ) {
  const int b = blockIdx.x;
  const size_t n = static_cast<size_t>(dk) * d;
  const float *SK = SKall + b * n, *SV = SVall + b * n;
  acc_t* dr = nlk::thread_row(dk);
  for (int t = threadIdx.x; t < s; t += blockDim.x) {
    const size_t o = (static_cast<size_t>(b) * s + t) * d, oc = (static_cast<size_t>(b) * s + t) * dk;
    const acc_t norm = nlk::silu_norm(R + oc, dk);
    if (norm <= nlk::kNsiluEps) {
      for (int j = 0; j < d; j++) DQ[o + j] = 0.0f;
      continue;
    }
    // dĉ = S_Vᵀ dy into dr, then the nsilu VJP in place
    for (int l = 0; l < dk; l++) {
      acc_t acc = 0;
      for (int i = 0; i < d; i++) acc += static_cast<acc_t>(SV[i * dk + l]) * DY[o + i];
      dr[l] = acc;
    }
    nlk::nsilu_vjp_at(R + oc, dr, dk, norm, dr);
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int l = 0; l < dk; l++) acc += static_cast<acc_t>(SK[l * d + j]) * dr[l];
      DQ[o + j] = static_cast<float>(acc);
    }
  }
}

int check(int B, int s, int d, int dk, double lk, double lv) {
  if (B < 1 || s < 1 || d < 1 || dk < 1 || dk > d) return NLK_ERR_BAD_SIZE;
  if (!(lk >= 0.0) || !(lv >= 0.0)) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_trellis_frozen_forward(int B, int s, int d, int d_compress, double lambda_k, double lambda_v,
                                       const float* q, const float* S_K, const float* S_V, float* y, float* r) {
  if (int st = check(B, s, d, d_compress, lambda_k, lambda_v)) return st;
  NLK_REQUIRE_PTRS(q, S_K, S_V, y, r);
  const size_t sd = static_cast<size_t>(B) * s * d, n = static_cast<size_t>(B) * d_compress * d;
  nlk::Call call;
  const float *gq = call.in(q, sd), *gk = call.in(S_K, n), *gv = call.in(S_V, n);
  float *oy = call.out(y, sd), *orr = call.out(r, static_cast<size_t>(B) * s * d_compress);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(s);
  call.start();
  NLK_LAUNCH(trellis_frozen_read_kernel, B, nt, static_cast<size_t>(nt) * d_compress * sizeof(acc_t))(s, d, d_compress, gq, gk,
                                                                                                     gv, oy, orr);
  return call.finish();
}

NLK_API int nlk_trellis_frozen_backward(int B, int s, int d, int d_compress, double lambda_k, double lambda_v,
                                        const float* q, const float* S_K, const float* S_V, const float* r,
                                        const float* dy, float* dq) {
  if (int st = check(B, s, d, d_compress, lambda_k, lambda_v)) return st;
  NLK_REQUIRE_PTRS(q, S_K, S_V, r, dy, dq);
  const size_t sd = static_cast<size_t>(B) * s * d, n = static_cast<size_t>(B) * d_compress * d;
  nlk::Call call;
  const float *gk = call.in(S_K, n), *gv = call.in(S_V, n), *gr = call.in(r, static_cast<size_t>(B) * s * d_compress),
              *gdy = call.in(dy, sd);
  float* odq = call.out(dq, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(s);
  call.start();
  NLK_LAUNCH(trellis_frozen_vjp_kernel, B, nt, static_cast<size_t>(nt) * d_compress * sizeof(acc_t))(s, d, d_compress, gk, gv,
                                                                                                    gr, gdy, odq);
  return call.finish();
}

}  // extern "C"
