/*
 * Frozen read of the matrix-memory rules (Delta, Titans, Hebbian, Atlas; docs/spec/titans-family.md
 * §2.4, §3, §4.3, §5.2, §6; reference src/rules/matrix.ts): y_t = M q_t, and its VJP
 * dq_t = Mᵀ dy_t. Titans and Atlas keep S too; the read ignores it (it is still an argument, so
 * every rule's frozen ABI takes its whole state). Tokens are independent: threads take rows for
 * the read and columns for the VJP, and no barrier is needed.
 */
#include "common.cuh"

namespace {

__global__ void matrix_read_kernel(int s, int d, const float* __restrict__ Q, const float* __restrict__ Mall,
                                   float* __restrict__ Y) {
  const int b = blockIdx.x;
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d;
  const float *M = Mall + b * dd, *q = Q + b * sd;
  float* y = Y + b * sd;
  for (int i = threadIdx.x; i < d; i += blockDim.x)
    for (int t = 0; t < s; t++) {
      acc_t acc = 0;
      for (int j = 0; j < d; j++) acc += M[i * d + j] * q[t * d + j];
      y[t * d + i] = static_cast<float>(acc);
    }
}

__global__ void matrix_read_vjp_kernel(int s, int d, const float* __restrict__ Mall, const float* __restrict__ DY,
                                       float* __restrict__ DQ) {
  const int b = blockIdx.x;
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d;
  const float *M = Mall + b * dd, *dy = DY + b * sd;
  float* dq = DQ + b * sd;
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    for (int t = 0; t < s; t++) {
      acc_t acc = 0;
      for (int i = 0; i < d; i++) acc += M[i * d + j] * dy[t * d + i];
      dq[t * d + j] = static_cast<float>(acc);
    }
}

int frozen_forward(int B, int s, int d, const float* q, const float* M, float* y) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(q, M, y);
  const size_t sd = static_cast<size_t>(B) * s * d;
  nlk::Call call;
  const float *gq = call.in(q, sd), *gm = call.in(M, static_cast<size_t>(B) * d * d);
  float* oy = call.out(y, sd);
  if (call.status() != 0) return call.finish();
  call.start();
  NLK_LAUNCH(matrix_read_kernel, B, nlk::threads_for(d), 0)(s, d, gq, gm, oy);
  return call.finish();
}

int frozen_backward(int B, int s, int d, const float* q, const float* M, const float* dy, float* dq) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(q, M, dy, dq);
  const size_t sd = static_cast<size_t>(B) * s * d;
  nlk::Call call;
  const float *gm = call.in(M, static_cast<size_t>(B) * d * d), *gdy = call.in(dy, sd);
  float* odq = call.out(dq, sd);
  if (call.status() != 0) return call.finish();
  call.start();
  NLK_LAUNCH(matrix_read_vjp_kernel, B, nlk::threads_for(d), 0)(s, d, gm, gdy, odq);
  return call.finish();
}

}  // namespace

extern "C" {

NLK_API int nlk_delta_frozen_forward(int B, int s, int d, const float* q, const float* M, float* y) {
  return frozen_forward(B, s, d, q, M, y);
}
NLK_API int nlk_delta_frozen_backward(int B, int s, int d, const float* q, const float* M, const float* dy, float* dq) {
  return frozen_backward(B, s, d, q, M, dy, dq);
}
NLK_API int nlk_hebbian_frozen_forward(int B, int s, int d, const float* q, const float* M, float* y) {
  return frozen_forward(B, s, d, q, M, y);
}
NLK_API int nlk_hebbian_frozen_backward(int B, int s, int d, const float* q, const float* M, const float* dy,
                                        float* dq) {
  return frozen_backward(B, s, d, q, M, dy, dq);
}
NLK_API int nlk_titans_frozen_forward(int B, int s, int d, const float* q, const float* M, const float* S, float* y) {
  if (S == nullptr) return NLK_ERR_NULL_POINTER;
  return frozen_forward(B, s, d, q, M, y);
}
NLK_API int nlk_titans_frozen_backward(int B, int s, int d, const float* q, const float* M, const float* S,
                                       const float* dy, float* dq) {
  if (S == nullptr) return NLK_ERR_NULL_POINTER;
  return frozen_backward(B, s, d, q, M, dy, dq);
}
NLK_API int nlk_atlas_frozen_forward(int B, int s, int d, const float* q, const float* M, const float* S, float* y) {
  if (S == nullptr) return NLK_ERR_NULL_POINTER;
  return frozen_forward(B, s, d, q, M, y);
}
NLK_API int nlk_atlas_frozen_backward(int B, int s, int d, const float* q, const float* M, const float* S,
                                      const float* dy, float* dq) {
  if (S == nullptr) return NLK_ERR_NULL_POINTER;
  return frozen_backward(B, s, d, q, M, dy, dq);
}

}  // extern "C"
