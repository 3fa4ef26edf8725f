/*
 * MONETA kernel pair (docs/spec/miras-compression.md#moneta, docs/spec/decisions.md#d9; reference src/rules/moneta.ts):
 *   g = φ_p(e) ;  A_{t+1} = α_t A_t − θ_t (G_t + 2λ₂ W_t) ;  W_{t+1} = N_q(A_{t+1}) ;  y_t = read(W_{t+1}, q_t)
 * for both matrices. N_q(A) = A / n^{q−2}, n = (Σ (A²+1e-12)^{q/2})^{1/q} (each matrix its own n);
 * with q = 2 it is the identity and A = W (the accumulator states then equal the W states).
 * A_0 = W_0 at the start of every call.
 */
#include "mlp.cuh"

namespace {

constexpr double kPathTol = 1e-6;
constexpr double kLqEps = 1e-12;
constexpr double kLqTiny = 1e-30;

struct Hyper {
  int dh;
  double p, q, l2, sharp;
  __host__ __device__ bool l2path() const { return fabs(q - 2.0) < kPathTol; }
  __host__ __device__ nlk::Bias bias() const {
    if (fabs(p - 2.0) < kPathTol) return {nlk::Bias::kTwice, p, sharp, 0};
    if (fabs(p - 1.0) < kPathTol) return {nlk::Bias::kTanh, p, sharp, 0};
    return {nlk::Bias::kLpGeneral, p, sharp, 0};
  }
};

/** Per-thread partial Σ (A² + 1e-12)^{q/2} over the flat indices this thread owns. */
__device__ inline acc_t lq_partial(const float* A, int n, double q) {
  acc_t s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t x = A[i];
    s += pow(x * x + kLqEps, q / 2.0);
  }
  return s;
}

/** W = N_q(A) for both matrices (A, W: this token's state slices). */
__device__ void lq_normalize(const nlk::MlpSmem& sm, const float* A1, int n1, const float* A2, int n2, double q, float* W1,
                             float* W2) {
  const int tid = threadIdx.x, nt = blockDim.x;
  sm.red[tid] = lq_partial(A1, n1, q);
  sm.red[nt + tid] = lq_partial(A2, n2, q);
  nlk::block_sums(sm.red, 2);
  if (tid == 0) {
    for (int m = 0; m < 2; m++) {
      const acc_t n = pow(sm.red[m * nt], 1.0 / q), s = pow(n, q - 2.0);
      sm.scal[m] = s < kLqTiny ? 1.0 : s;  // the divisor; A itself where it underflows
    }
  }
  __syncthreads();
  for (int i = tid; i < n1; i += nt) W1[i] = static_cast<float>(A1[i] / sm.scal[0]);
  for (int i = tid; i < n2; i += nt) W2[i] = static_cast<float>(A2[i] / sm.scal[1]);
  __syncthreads();
}

/**
 * out += N_qᵀ(A)[Wbar] for both matrices: Wbar/s − c ⟨Wbar, A⟩ A ⊙ (A²+1e-12)^{(q−2)/2},
 * c = (q−2)/(n² s²); out += Wbar where s underflows.
 */
__device__ void lq_vjp_add(const nlk::MlpSmem& sm, const float* A1, int n1, const float* A2, int n2, double q,
                           const adj_t* Wb1, const adj_t* Wb2, adj_t* out1, adj_t* out2) {
  const int tid = threadIdx.x, nt = blockDim.x;
  acc_t w1 = 0, w2 = 0;
  for (int i = tid; i < n1; i += nt) w1 += Wb1[i] * A1[i];
  for (int i = tid; i < n2; i += nt) w2 += Wb2[i] * A2[i];
  sm.red[tid] = lq_partial(A1, n1, q);
  sm.red[nt + tid] = lq_partial(A2, n2, q);
  sm.red[2 * nt + tid] = w1;
  sm.red[3 * nt + tid] = w2;
  nlk::block_sums(sm.red, 4);
  if (tid == 0) {
    for (int m = 0; m < 2; m++) {
      const acc_t n = pow(sm.red[m * nt], 1.0 / q), s = pow(n, q - 2.0);
      sm.scal[2 * m] = s;
      sm.scal[2 * m + 1] = (q - 2.0) / (n * n * s * s) * sm.red[(2 + m) * nt];
    }
  }
  __syncthreads();
  const double e = (q - 2.0) / 2.0;
  for (int m = 0; m < 2; m++) {
    const float* A = m == 0 ? A1 : A2;
    const adj_t* Wb = m == 0 ? Wb1 : Wb2;
    adj_t* out = m == 0 ? out1 : out2;
    const int n = m == 0 ? n1 : n2;
    const acc_t s = sm.scal[2 * m], wa = sm.scal[2 * m + 1];
    for (int i = tid; i < n; i += nt) {
      if (s < kLqTiny) {
        out[i] += Wb[i];
      } else {
        const acc_t x = A[i];
        out[i] += Wb[i] / s - wa * x * pow(x * x + kLqEps, e);
      }
    }
  }
  __syncthreads();
}

__global__ void moneta_forward_kernel(int s, int d, Hyper hp, const float* __restrict__ K, const float* __restrict__ V,
                                      const float* __restrict__ Q, const float* __restrict__ alpha,
                                      const float* __restrict__ theta, const float* __restrict__ W10,
                                      const float* __restrict__ W20, float* __restrict__ Y, float* __restrict__ W1out,
                                      float* __restrict__ W2out, float* __restrict__ w1States, float* __restrict__ w2States,
                                      float* __restrict__ a1States, float* __restrict__ a2States) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dh = hp.dh;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias = hp.bias();
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  float *W1 = nlk::start_states(w1States, W10, b, s, n1), *W2 = nlk::start_states(w2States, W20, b, s, n2);
  float *A1 = nlk::start_states(a1States, W10, b, s, n1), *A2 = nlk::start_states(a2States, W20, b, s, n2);
  for (int t = 0; t < s; t++) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, nullptr);
    __syncthreads();
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    for (int idx = tid; idx < n1; idx += nt) {
      const acc_t upd = static_cast<acc_t>(sm.u[idx / d]) * sm.k[idx % d] + 2.0 * hp.l2 * W1[c1 + idx];
      A1[c1 + n1 + idx] = static_cast<float>(al * A1[c1 + idx] - th * upd);
    }
    for (int idx = tid; idx < n2; idx += nt) {
      const acc_t upd = static_cast<acc_t>(sm.g[idx / dh]) * sm.h[idx % dh] + 2.0 * hp.l2 * W2[c2 + idx];
      A2[c2 + n2 + idx] = static_cast<float>(al * A2[c2 + idx] - th * upd);
    }
    __syncthreads();
    if (hp.l2path()) {
      for (int idx = tid; idx < n1; idx += nt) W1[c1 + n1 + idx] = A1[c1 + n1 + idx];
      for (int idx = tid; idx < n2; idx += nt) W2[c2 + n2 + idx] = A2[c2 + n2 + idx];
      __syncthreads();
    } else {
      lq_normalize(sm, A1 + c1 + n1, n1, A2 + c2 + n2, n2, hp.q, W1 + c1 + n1, W2 + c2 + n2);
    }
    nlk::mlp_read(sm, d, dh, W1 + c1 + n1, W2 + c2 + n2, Y + b * sd + static_cast<size_t>(t) * d);
  }
  nlk::store_final_state(W1out, W1, b, s, n1);
  nlk::store_final_state(W2out, W2, b, s, n2);
}

__global__ void moneta_backward_kernel(int s, int d, Hyper hp, const float* __restrict__ K, const float* __restrict__ V,
                                       const float* __restrict__ Q, const float* __restrict__ alpha,
                                       const float* __restrict__ theta, const float* __restrict__ w1States,
                                       const float* __restrict__ w2States, const float* __restrict__ a1States,
                                       const float* __restrict__ a2States, const float* __restrict__ DY,
                                       float* __restrict__ DK, float* __restrict__ DV, float* __restrict__ DQ,
                                       float* __restrict__ dalpha, float* __restrict__ dtheta, adj_t* __restrict__ scratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dh = hp.dh;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias = hp.bias();
  const bool l2path = hp.l2path();
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *W1 = nlk::seq_states(w1States, b, s, n1), *W2 = nlk::seq_states(w2States, b, s, n2);
  const float *A1 = nlk::seq_states(a1States, b, s, n1), *A2 = nlk::seq_states(a2States, b, s, n2);
  // Ā = ∂L/∂A_{t+1} (Ab); on the L_q path also R (the read's ∂L/∂W_{t+1}) and D (∂L/∂W_t)
  adj_t* base = scratch + static_cast<size_t>(b) * 3 * (n1 + n2);
  adj_t *Ab1 = base, *Ab2 = Ab1 + n1, *R1 = Ab2 + n2, *R2 = R1 + n1, *D1 = R2 + n2, *D2 = D1 + n1;
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  for (int t = s - 1; t >= 0; t--) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, DY + b * sd);
    __syncthreads();
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2, x1 = c1 + n1, x2 = c2 + n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    // (read) Ā = N_qᵀ(A_{t+1})[R] + Â
    if (l2path) {
      nlk::read_vjp(sm, d, dh, W1 + x1, W2 + x2, Ab1, Ab2, true, dq + static_cast<size_t>(t) * d);
    } else {
      nlk::read_vjp(sm, d, dh, W1 + x1, W2 + x2, R1, R2, false, dq + static_cast<size_t>(t) * d);
      lq_vjp_add(sm, A1 + x1, n1, A2 + x2, n2, hp.q, R1, R2, Ab1, Ab2);
    }
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    nlk::chain_in(sm, d, dh, Ab1, Ab2);
    // (gates) dα = ⟨Ā, A_t⟩ ; dθ = −(⟨Ā, G_t⟩ + 2λ₂⟨Ā, W_t⟩)
    acc_t pa = 0, pw = 0;
    for (int i = tid; i < n1; i += nt) {
      pa += Ab1[i] * A1[c1 + i];
      pw += Ab1[i] * W1[c1 + i];
    }
    for (int i = tid; i < n2; i += nt) {
      pa += Ab2[i] * A2[c2 + i];
      pw += Ab2[i] * W2[c2 + i];
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pw;
    nlk::block_sums(sm.red, 2);
    if (tid == 0) {
      dalpha[gs + t] = static_cast<float>(sm.red[0]);
      dtheta[gs + t] = static_cast<float>(-(nlk::inner_grad_dot(sm, d, dh) + 2.0 * hp.l2 * sm.red[nt]));
    }
    if (l2path) {
      // D = (α − 2λ₂θ) Ŵ + chain, and it is the next Ŵ
      const adj_t keep = al - 2.0 * hp.l2 * th;
      for (int i = tid; i < n1; i += nt) Ab1[i] *= keep;
      for (int i = tid; i < n2; i += nt) Ab2[i] *= keep;
      __syncthreads();
      nlk::chain_out(sm, d, dh, -th, W1 + c1, W2 + c2, Ab1, Ab2, bias, dk + static_cast<size_t>(t) * d,
                     dv + static_cast<size_t>(t) * d);
    } else {
      // D = −2λ₂θ Ā + chain ;  Â ← α Ā + N_qᵀ(A_t)[D]  (W_0 is not N_q(A_0): nothing at t = 0)
      const adj_t c = -2.0 * hp.l2 * th;
      for (int i = tid; i < n1; i += nt) D1[i] = c * Ab1[i];
      for (int i = tid; i < n2; i += nt) D2[i] = c * Ab2[i];
      __syncthreads();
      nlk::chain_out(sm, d, dh, -th, W1 + c1, W2 + c2, D1, D2, bias, dk + static_cast<size_t>(t) * d,
                     dv + static_cast<size_t>(t) * d);
      for (int i = tid; i < n1; i += nt) Ab1[i] *= al;
      for (int i = tid; i < n2; i += nt) Ab2[i] *= al;
      __syncthreads();
      if (t > 0) lq_vjp_add(sm, A1 + c1, n1, A2 + c2, n2, hp.q, D1, D2, Ab1, Ab2);
    }
  }
}

int check_hyper(int dh, double p, double q, double l2, double sharp) {
  if (!nlk::valid_hidden(dh)) return NLK_ERR_BAD_SIZE;
  if (!(p >= 1.0) || !(q > 1.0) || !(l2 >= 0.0) || !(sharp > 0.0)) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_moneta_forward(int B, int s, int d, int d_hidden, double p, double q_exp, double lambda_2,
                               double sign_sharpness, const float* k, const float* v, const float* q, const float* alpha,
                               const float* theta, const float* W1_0, const float* W2_0, float* y, float* W1, float* W2,
                               float* w1States, float* w2States, float* a1States, float* a2States) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d_hidden, p, q_exp, lambda_2, sign_sharpness)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, W1_0, W2_0, y, W1, W2, w1States, w2States, a1States, a2States);
  const Hyper hp{d_hidden, p, q_exp, lambda_2, sign_sharpness};
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s, n = static_cast<size_t>(B) * d * d_hidden;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d_hidden;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *g1 = call.in(W1_0, n), *g2 = call.in(W2_0, n);
  float *oy = call.out(y, sd), *o1 = call.out(W1, n), *o2 = call.out(W2, n), *os1 = call.out(w1States, ns),
        *os2 = call.out(w2States, ns), *oa1 = call.out(a1States, ns), *oa2 = call.out(a2States, ns);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, d_hidden);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, d_hidden, nt);
  call.start();
  NLK_LAUNCH(moneta_forward_kernel, B, nt, smem)(s, d, hp, gk, gv, gq, ga, gt, g1, g2, oy, o1, o2, os1, os2, oa1, oa2);
  return call.finish();
}

NLK_API int nlk_moneta_backward(int B, int s, int d, int d_hidden, double p, double q_exp, double lambda_2,
                                double sign_sharpness, const float* k, const float* v, const float* q,
                                const float* alpha, const float* theta, const float* w1States, const float* w2States,
                                const float* a1States, const float* a2States, const float* dy, float* dk, float* dv,
                                float* dq, float* dalpha, float* dtheta) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d_hidden, p, q_exp, lambda_2, sign_sharpness)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, w1States, w2States, a1States, a2States, dy, dk, dv, dq, dalpha, dtheta);
  const Hyper hp{d_hidden, p, q_exp, lambda_2, sign_sharpness};
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d_hidden;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *g1 = call.in(w1States, ns), *g2 = call.in(w2States, ns),
              *ga1 = call.in(a1States, ns), *ga2 = call.in(a2States, ns), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g),
        *odt = call.out(dtheta, g);
  adj_t* scratch = call.scratch<adj_t>(static_cast<size_t>(B) * 6 * d * d_hidden);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, d_hidden);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, d_hidden, nt);
  call.start();
  NLK_LAUNCH(moneta_backward_kernel, B, nt, smem)(s, d, hp, gk, gv, gq, ga, gt, g1, g2, ga1, ga2, gdy, odk, odv, odq, oda,
                                                   odt, scratch);
  return call.finish();
}

}  // extern "C"
