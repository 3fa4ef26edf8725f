/*
 * Frozen read of the MLP-memory rules (MONETA, YAAD, MEMORA; docs/spec/miras-compression.md#moneta-frozen,
 * §3.4, §4.4, D3; reference src/rules/mlp.ts mlpFrozenRead):
 *   y_t = W2 silu(W1 q_t) ;  dq_t = W1ᵀ((W2ᵀ dy_t) ⊙ silu'(W1 q_t))
 * The state gets no gradient. Each rule's entry points take its full hyperparameter list; only
 * d_hidden matters here.
 */
#include "mlp.cuh"

namespace {

__global__ void mlp_frozen_read_kernel(int s, int d, int dh, const float* __restrict__ Q, const float* __restrict__ W1all,
                                       const float* __restrict__ W2all, float* __restrict__ Y) {
  const int b = blockIdx.x;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, static_cast<int>(blockDim.x));
  const size_t n = static_cast<size_t>(d) * dh, sd = static_cast<size_t>(s) * d;
  for (int t = 0; t < s; t++) {
    nlk::load_token(sm, d, t, nullptr, nullptr, Q + b * sd, nullptr);
    __syncthreads();
    nlk::mlp_read(sm, d, dh, W1all + b * n, W2all + b * n, Y + b * sd + static_cast<size_t>(t) * d);
  }
}

__global__ void mlp_frozen_vjp_kernel(int s, int d, int dh, const float* __restrict__ Q, const float* __restrict__ W1all,
                                      const float* __restrict__ W2all, const float* __restrict__ DY,
                                      float* __restrict__ DQ) {
  const int b = blockIdx.x;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, static_cast<int>(blockDim.x));
  const size_t n = static_cast<size_t>(d) * dh, sd = static_cast<size_t>(s) * d;
  for (int t = 0; t < s; t++) {
    nlk::load_token(sm, d, t, nullptr, nullptr, Q + b * sd, DY + b * sd);
    __syncthreads();
    nlk::read_vjp(sm, d, dh, W1all + b * n, W2all + b * n, nullptr, nullptr, false, DQ + b * sd + static_cast<size_t>(t) * d);
  }
}

int frozen_forward(int B, int s, int d, int dh, const float* q, const float* W1, const float* W2, float* y) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (!nlk::valid_hidden(dh)) return NLK_ERR_BAD_SIZE;
  NLK_REQUIRE_PTRS(q, W1, W2, y);
  const size_t sd = static_cast<size_t>(B) * s * d, n = static_cast<size_t>(B) * d * dh;
  nlk::Call call;
  const float *gq = call.in(q, sd), *g1 = call.in(W1, n), *g2 = call.in(W2, n);
  float* oy = call.out(y, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, dh);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, dh, nt);
  call.start();
  NLK_LAUNCH(mlp_frozen_read_kernel, B, nt, smem)(s, d, dh, gq, g1, g2, oy);
  return call.finish();
}

int frozen_backward(int B, int s, int d, int dh, const float* q, const float* W1, const float* W2, const float* dy,
                    float* dq) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (!nlk::valid_hidden(dh)) return NLK_ERR_BAD_SIZE;
  NLK_REQUIRE_PTRS(q, W1, W2, dy, dq);
  const size_t sd = static_cast<size_t>(B) * s * d, n = static_cast<size_t>(B) * d * dh;
  nlk::Call call;
  const float *gq = call.in(q, sd), *g1 = call.in(W1, n), *g2 = call.in(W2, n), *gdy = call.in(dy, sd);
  float* odq = call.out(dq, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, dh);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, dh, nt);
  call.start();
  NLK_LAUNCH(mlp_frozen_vjp_kernel, B, nt, smem)(s, d, dh, gq, g1, g2, gdy, odq);
  return call.finish();
}

}  // namespace

extern "C" {

NLK_API int nlk_moneta_frozen_forward(int B, int s, int d, int d_hidden, double, double, double, double, const float* q,
                                      const float* W1, const float* W2, float* y) {
  return frozen_forward(B, s, d, d_hidden, q, W1, W2, y);
}
NLK_API int nlk_moneta_frozen_backward(int B, int s, int d, int d_hidden, double, double, double, double,
                                       const float* q, const float* W1, const float* W2, const float* dy, float* dq) {
  return frozen_backward(B, s, d, d_hidden, q, W1, W2, dy, dq);
}
NLK_API int nlk_yaad_frozen_forward(int B, int s, int d, int d_hidden, double, double, double, const float* q,
                                    const float* W1, const float* W2, float* y) {
  return frozen_forward(B, s, d, d_hidden, q, W1, W2, y);
}
NLK_API int nlk_yaad_frozen_backward(int B, int s, int d, int d_hidden, double, double, double, const float* q,
                                     const float* W1, const float* W2, const float* dy, float* dq) {
  return frozen_backward(B, s, d, d_hidden, q, W1, W2, dy, dq);
}
NLK_API int nlk_memora_frozen_forward(int B, int s, int d, int d_hidden, const float* q, const float* W1,
                                      const float* W2, float* y) {
  return frozen_forward(B, s, d, d_hidden, q, W1, W2, y);
}
NLK_API int nlk_memora_frozen_backward(int B, int s, int d, int d_hidden, const float* q, const float* W1,
                                       const float* W2, const float* dy, float* dq) {
  return frozen_backward(B, s, d, d_hidden, q, W1, W2, dy, dq);
}

}  // extern "C"
