/*
 * MEMORA kernel pair (docs/spec/miras-compression.md#memora; reference src/rules/memora.ts): MLP memory
 * with simplex rows, L2 bias (g = e), KL retention as a row softmax, READ BEFORE WRITE:
 *   y_t = read(W_t, q_t) ;  W_{t+1}[i,:] = softmax(α_t logc(W_t[i,:]) − θ_t G_t[i,:]) ,  logc(w) = ln max(w, 1e-8)
 * One thread per row for the softmax and its VJP; the logits are recomputed in each pass.
 */
#include "mlp.cuh"

namespace {

constexpr double kLogFloor = 1e-8;

__device__ inline double logc(double w) { return log(w > kLogFloor ? w : kLogFloor); }
/** Exact derivative of logc: 1/w above the clamp, 0 where the clamp is active (D2). */
__device__ inline double logc_prime(double w) { return w > kLogFloor ? 1.0 / w : 0.0; }

/** One row: out = softmax(α logc(W[0..n)) − θ x_i y[0..n)), max-subtracted. */
__device__ inline void softmax_row(const float* W, int n, acc_t al, acc_t cx, const float* yv, float* out) {
  double mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    const double z = al * logc(W[j]) - cx * yv[j];
    mx = z > mx ? z : mx;
  }
  double sum = 0;
  for (int j = 0; j < n; j++) sum += exp(al * logc(W[j]) - cx * yv[j] - mx);
  const double div = sum > 0 ? sum : 1.0;
  for (int j = 0; j < n; j++) out[j] = static_cast<float>(exp(al * logc(W[j]) - cx * yv[j] - mx) / div);
}

__global__ void memora_forward_kernel(int s, int d, int dh, const float* __restrict__ K, const float* __restrict__ V,
                                      const float* __restrict__ Q, const float* __restrict__ alpha,
                                      const float* __restrict__ theta, const float* __restrict__ W10,
                                      const float* __restrict__ W20, float* __restrict__ Y, float* __restrict__ W1out,
                                      float* __restrict__ W2out, float* __restrict__ w1States, float* __restrict__ w2States) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias{nlk::Bias::kIdentity, 0, 0, 0};
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  float *W1 = nlk::start_states(w1States, W10, b, s, n1), *W2 = nlk::start_states(w2States, W20, b, s, n2);
  for (int t = 0; t < s; t++) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, nullptr);
    __syncthreads();
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    nlk::mlp_read(sm, d, dh, W1 + c1, W2 + c2, Y + b * sd + static_cast<size_t>(t) * d);
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    for (int i = tid; i < dh; i += nt) softmax_row(W1 + c1 + i * d, d, al, th * sm.u[i], sm.k, W1 + c1 + n1 + i * d);
    for (int i = tid; i < d; i += nt) softmax_row(W2 + c2 + i * dh, dh, al, th * sm.g[i], sm.h, W2 + c2 + n2 + i * dh);
    __syncthreads();
  }
  nlk::store_final_state(W1out, W1, b, s, n1);
  nlk::store_final_state(W2out, W2, b, s, n2);
}

/** In place, one row per thread: Ŵ ← dZ = P ⊙ (Ŵ − ⟨P, Ŵ⟩) with P = W_{t+1} (the softmax output). */
__device__ inline void softmax_rows_vjp(const float* P, int rows, int cols, adj_t* G) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    acc_t dot = 0;
    for (int j = 0; j < cols; j++) dot += static_cast<acc_t>(P[r * cols + j]) * G[r * cols + j];
    for (int j = 0; j < cols; j++) G[r * cols + j] = P[r * cols + j] * (G[r * cols + j] - dot);
  }
}

__global__ void memora_backward_kernel(int s, int d, int dh, const float* __restrict__ K, const float* __restrict__ V,
                                       const float* __restrict__ Q, const float* __restrict__ alpha,
                                       const float* __restrict__ theta, const float* __restrict__ w1States,
                                       const float* __restrict__ w2States, const float* __restrict__ DY,
                                       float* __restrict__ DK, float* __restrict__ DV, float* __restrict__ DQ,
                                       float* __restrict__ dalpha, float* __restrict__ dtheta, adj_t* __restrict__ scratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias{nlk::Bias::kIdentity, 0, 0, 0};
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *W1 = nlk::seq_states(w1States, b, s, n1), *W2 = nlk::seq_states(w2States, b, s, n2);
  // Ŵ = ∂L/∂W_{t+1} (turned into dZ in place) and D = ∂L/∂W_t, swapped after each token
  adj_t* base = scratch + static_cast<size_t>(b) * 2 * (n1 + n2);
  adj_t *Wh1 = base, *Wh2 = Wh1 + n1, *D1 = Wh2 + n2, *D2 = D1 + n1;
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  for (int t = s - 1; t >= 0; t--) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, DY + b * sd);
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    softmax_rows_vjp(W1 + c1 + n1, dh, d, Wh1);
    softmax_rows_vjp(W2 + c2 + n2, d, dh, Wh2);
    __syncthreads();
    // dα = ⟨dZ, logc(W_t)⟩
    acc_t pa = 0;
    for (int i = tid; i < n1; i += nt) pa += Wh1[i] * logc(W1[c1 + i]);
    for (int i = tid; i < n2; i += nt) pa += Wh2[i] * logc(W2[c2 + i]);
    sm.red[tid] = pa;
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    nlk::chain_in(sm, d, dh, Wh1, Wh2);
    if (tid == 0) {
      dalpha[gs + t] = static_cast<float>(nlk::ordered_sum(sm.red, 0));
      dtheta[gs + t] = static_cast<float>(-nlk::inner_grad_dot(sm, d, dh));  // dθ = −⟨dZ, G_t⟩
    }
    // (direct) D = α dZ ⊙ logc'(W_t); dG = −θ dZ, then the inner-gradient chain
    for (int i = tid; i < n1; i += nt) D1[i] = al * Wh1[i] * logc_prime(W1[c1 + i]);
    for (int i = tid; i < n2; i += nt) D2[i] = al * Wh2[i] * logc_prime(W2[c2 + i]);
    __syncthreads();
    nlk::chain_out(sm, d, dh, -th, W1 + c1, W2 + c2, D1, D2, bias, dk + static_cast<size_t>(t) * d,
                   dv + static_cast<size_t>(t) * d);
    // (read before write: at W_t)
    nlk::read_vjp(sm, d, dh, W1 + c1, W2 + c2, D1, D2, true, dq + static_cast<size_t>(t) * d);
    nlk::swap(Wh1, D1);
    nlk::swap(Wh2, D2);
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_memora_forward(int B, int s, int d, int d_hidden, const float* k, const float* v, const float* q,
                               const float* alpha, const float* theta, const float* W1_0, const float* W2_0, float* y,
                               float* W1, float* W2, float* w1States, float* w2States) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (!nlk::valid_hidden(d_hidden)) return NLK_ERR_BAD_SIZE;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, W1_0, W2_0, y, W1, W2, w1States, w2States);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s, n = static_cast<size_t>(B) * d * d_hidden;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d_hidden;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *g1 = call.in(W1_0, n), *g2 = call.in(W2_0, n);
  float *oy = call.out(y, sd), *o1 = call.out(W1, n), *o2 = call.out(W2, n), *os1 = call.out(w1States, ns),
        *os2 = call.out(w2States, ns);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, d_hidden);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, d_hidden, nt);
  call.start();
  NLK_LAUNCH(memora_forward_kernel, B, nt, smem)(s, d, d_hidden, gk, gv, gq, ga, gt, g1, g2, oy, o1, o2, os1, os2);
  return call.finish();
}

NLK_API int nlk_memora_backward(int B, int s, int d, int d_hidden, const float* k, const float* v, const float* q,
                                const float* alpha, const float* theta, const float* w1States, const float* w2States,
                                const float* dy, float* dk, float* dv, float* dq, float* dalpha, float* dtheta) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (!nlk::valid_hidden(d_hidden)) return NLK_ERR_BAD_SIZE;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, w1States, w2States, dy, dk, dv, dq, dalpha, dtheta);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d_hidden;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *g1 = call.in(w1States, ns), *g2 = call.in(w2States, ns), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g),
        *odt = call.out(dtheta, g);
  adj_t* scratch = call.scratch<adj_t>(static_cast<size_t>(B) * 4 * d * d_hidden);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, d_hidden);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, d_hidden, nt);
  call.start();
  NLK_LAUNCH(memora_backward_kernel, B, nt, smem)(s, d, d_hidden, gk, gv, gq, ga, gt, g1, g2, gdy, odk, odv, odq, oda,
                                                   odt, scratch);
  return call.finish();
}

}  // extern "C"
