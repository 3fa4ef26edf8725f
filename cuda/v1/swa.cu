/*
 * Sliding-window attention kernel pair (docs/spec/titans-family.md#swa; reference src/rules/swa.ts).
 * Per head h (columns [h·hd, (h+1)·hd)) and position i, τ = 1/√hd, j0 = max(0, i − ws + 1):
 *   P[h,i,w] = softmax_w(τ ⟨Q[i,h], K[j0+w,h]⟩) for w < L = i − j0 + 1, 0 beyond ;  A[i,h] = Σ_w P_w V[j0+w,h]
 * A thread owns a (head, position) row. The backward first writes dS = τ P (dP − ⟨P, dP⟩) per
 * row (and dQ), then, after a barrier, gathers dK and dV per (head, key position): no two threads
 * ever add into the same element.
 */
#include "common.cuh"

namespace {

__device__ inline acc_t score(const float* q, const float* k, int d, int c0, int hd, int i, int j, acc_t tau) {
  acc_t acc = 0;
  for (int c = 0; c < hd; c++) acc += static_cast<acc_t>(q[static_cast<size_t>(i) * d + c0 + c]) * k[static_cast<size_t>(j) * d + c0 + c];
  return tau * acc;
}

__global__ void swa_forward_kernel(int s, int d, int nh, int ws, const float* __restrict__ K, const float* __restrict__ V,
                                   const float* __restrict__ Q, float* __restrict__ Y, float* __restrict__ P) {
  const int b = blockIdx.x, hd = d / nh;
  const size_t sd = static_cast<size_t>(s) * d;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd;
  float* y = Y + b * sd;
  float* Pb = P + static_cast<size_t>(b) * nh * s * ws;
  const acc_t tau = 1.0 / sqrt(static_cast<acc_t>(hd));
  for (int row = threadIdx.x; row < nh * s; row += blockDim.x) {
    const int h = row / s, i = row % s, c0 = h * hd;
    const int j0 = i - ws + 1 > 0 ? i - ws + 1 : 0, L = i - j0 + 1;
    float* p = Pb + (static_cast<size_t>(h) * s + i) * ws;
    acc_t mx = -INFINITY, sum = 0;
    for (int w = 0; w < L; w++) {
      const acc_t sc = score(q, k, d, c0, hd, i, j0 + w, tau);
      mx = sc > mx ? sc : mx;
    }
    for (int w = 0; w < L; w++) sum += exp(score(q, k, d, c0, hd, i, j0 + w, tau) - mx);
    for (int w = 0; w < ws; w++) p[w] = w < L ? static_cast<float>(exp(score(q, k, d, c0, hd, i, j0 + w, tau) - mx) / sum) : 0.0f;
    for (int c = 0; c < hd; c++) {
      acc_t acc = 0;
      for (int w = 0; w < L; w++) acc += static_cast<acc_t>(p[w]) * v[static_cast<size_t>(j0 + w) * d + c0 + c];
      y[static_cast<size_t>(i) * d + c0 + c] = static_cast<float>(acc);
    }
  }
}

__global__ void swa_backward_kernel(int s, int d, int nh, int ws, const float* __restrict__ K, const float* __restrict__ V,
                                    const float* __restrict__ Q, const float* __restrict__ P, const float* __restrict__ DY,
                                    float* __restrict__ DK, float* __restrict__ DV, float* __restrict__ DQ,
                                    adj_t* __restrict__ dS) {
  const int b = blockIdx.x, hd = d / nh;
  const size_t sd = static_cast<size_t>(s) * d, np = static_cast<size_t>(nh) * s * ws;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd, *dy = DY + b * sd, *Pb = P + b * np;
  adj_t* dSb = dS + b * np;
  const acc_t tau = 1.0 / sqrt(static_cast<acc_t>(hd));
  for (int row = threadIdx.x; row < nh * s; row += blockDim.x) {
    const int h = row / s, i = row % s, c0 = h * hd;
    const int j0 = i - ws + 1 > 0 ? i - ws + 1 : 0, L = i - j0 + 1;
    const size_t pi = (static_cast<size_t>(h) * s + i) * ws;
    acc_t pdp = 0;
    for (int w = 0; w < L; w++) {
      acc_t dp = 0;
      for (int c = 0; c < hd; c++) dp += static_cast<acc_t>(dy[static_cast<size_t>(i) * d + c0 + c]) * v[static_cast<size_t>(j0 + w) * d + c0 + c];
      dSb[pi + w] = dp;  // dP for now
      pdp += static_cast<acc_t>(Pb[pi + w]) * dp;
    }
    for (int w = 0; w < L; w++) dSb[pi + w] = tau * Pb[pi + w] * (dSb[pi + w] - pdp);
    for (int c = 0; c < hd; c++) {
      acc_t acc = 0;
      for (int w = 0; w < L; w++) acc += dSb[pi + w] * k[static_cast<size_t>(j0 + w) * d + c0 + c];
      DQ[b * sd + static_cast<size_t>(i) * d + c0 + c] = static_cast<float>(acc);
    }
  }
  __syncthreads();
  // key position j is in the window of queries i = j .. j + ws − 1, at offset w = j − j0(i)
  for (int row = threadIdx.x; row < nh * s; row += blockDim.x) {
    const int h = row / s, j = row % s, c0 = h * hd;
    for (int c = 0; c < hd; c++) {
      acc_t gk = 0, gv = 0;
      for (int i = j; i < s && i < j + ws; i++) {
        const int j0 = i - ws + 1 > 0 ? i - ws + 1 : 0;
        const size_t pw = (static_cast<size_t>(h) * s + i) * ws + (j - j0);
        gk += dSb[pw] * q[static_cast<size_t>(i) * d + c0 + c];
        gv += static_cast<acc_t>(Pb[pw]) * dy[static_cast<size_t>(i) * d + c0 + c];
      }
      DK[b * sd + static_cast<size_t>(j) * d + c0 + c] = static_cast<float>(gk);
      DV[b * sd + static_cast<size_t>(j) * d + c0 + c] = static_cast<float>(gv);
    }
  }
}

int check_hyper(int d, int heads, int window) {
  if (heads < 1 || window < 1 || d % heads != 0) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_swa_forward(int B, int s, int d, int heads, int window, const float* k, const float* v, const float* q,
                            float* y, float* attnP) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d, heads, window)) return st;
  NLK_REQUIRE_PTRS(k, v, q, y, attnP);
  const size_t sd = static_cast<size_t>(B) * s * d;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd);
  float *oy = call.out(y, sd), *op = call.out(attnP, static_cast<size_t>(B) * heads * s * window);
  if (call.status() != 0) return call.finish();
  call.start();
  NLK_LAUNCH(swa_forward_kernel, B, nlk::threads_for(heads * s), 0)(s, d, heads, window, gk, gv, gq, oy, op);
  return call.finish();
}

NLK_API int nlk_swa_backward(int B, int s, int d, int heads, int window, const float* k, const float* v, const float* q,
                             const float* attnP, const float* dy, float* dk, float* dv, float* dq) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d, heads, window)) return st;
  NLK_REQUIRE_PTRS(k, v, q, attnP, dy, dk, dv, dq);
  const size_t sd = static_cast<size_t>(B) * s * d, np = static_cast<size_t>(B) * heads * s * window;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *gp = call.in(attnP, np),
              *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd);
  adj_t* dS = call.scratch<adj_t>(np);
  if (call.status() != 0) return call.finish();
  call.start();
  NLK_LAUNCH(swa_backward_kernel, B, nlk::threads_for(heads * s), 0)(s, d, heads, window, gk, gv, gq, gp, gdy, odk, odv, odq,
                                                                    dS);
  return call.finish();
}

}  // extern "C"
