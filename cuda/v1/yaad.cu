/*
 * YAAD kernel pair (docs/spec/miras-compression.md#yaad; reference src/rules/yaad.ts): Huber bias
 * ψ(e) = e if |e| < δ else δ·sign(e), decoupled L2 retention toward the boundary snapshot B = W_0:
 *   W_{t+1} = α_t W_t − θ_t (G_t + 2λ_loc (W_t − B) + 2λ₂ W_t) ;  y_t = read(W_{t+1}, q_t)
 */
#include "mlp.cuh"

namespace {

struct Hyper {
  int dh;
  double delta, lloc, l2;
  __host__ __device__ nlk::Bias bias() const { return {nlk::Bias::kHuber, 0, 0, delta}; }
};

__global__ void yaad_forward_kernel(int s, int d, Hyper hp, const float* __restrict__ K, const float* __restrict__ V,
                                    const float* __restrict__ Q, const float* __restrict__ alpha,
                                    const float* __restrict__ theta, const float* __restrict__ W10,
                                    const float* __restrict__ W20, float* __restrict__ Y, float* __restrict__ W1out,
                                    float* __restrict__ W2out, float* __restrict__ w1States, float* __restrict__ w2States) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dh = hp.dh;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias = hp.bias();
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  float *W1 = nlk::start_states(w1States, W10, b, s, n1), *W2 = nlk::start_states(w2States, W20, b, s, n2);
  for (int t = 0; t < s; t++) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, nullptr);
    __syncthreads();
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    // the boundary snapshot B is the first saved state, W[0 : n]
    for (int idx = tid; idx < n1; idx += nt) {
      const acc_t w = W1[c1 + idx];
      const acc_t upd = static_cast<acc_t>(sm.u[idx / d]) * sm.k[idx % d] + 2.0 * hp.lloc * (w - W1[idx]) + 2.0 * hp.l2 * w;
      W1[c1 + n1 + idx] = static_cast<float>(al * w - th * upd);
    }
    for (int idx = tid; idx < n2; idx += nt) {
      const acc_t w = W2[c2 + idx];
      const acc_t upd = static_cast<acc_t>(sm.g[idx / dh]) * sm.h[idx % dh] + 2.0 * hp.lloc * (w - W2[idx]) + 2.0 * hp.l2 * w;
      W2[c2 + n2 + idx] = static_cast<float>(al * w - th * upd);
    }
    __syncthreads();
    nlk::mlp_read(sm, d, dh, W1 + c1 + n1, W2 + c2 + n2, Y + b * sd + static_cast<size_t>(t) * d);
  }
  nlk::store_final_state(W1out, W1, b, s, n1);
  nlk::store_final_state(W2out, W2, b, s, n2);
}

__global__ void yaad_backward_kernel(int s, int d, Hyper hp, const float* __restrict__ K, const float* __restrict__ V,
                                     const float* __restrict__ Q, const float* __restrict__ alpha,
                                     const float* __restrict__ theta, const float* __restrict__ w1States,
                                     const float* __restrict__ w2States, const float* __restrict__ DY,
                                     float* __restrict__ DK, float* __restrict__ DV, float* __restrict__ DQ,
                                     float* __restrict__ dalpha, float* __restrict__ dtheta, adj_t* __restrict__ scratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dh = hp.dh;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, nt);
  const nlk::Bias bias = hp.bias();
  const int n1 = dh * d, n2 = d * dh;
  const size_t sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *W1 = nlk::seq_states(w1States, b, s, n1), *W2 = nlk::seq_states(w2States, b, s, n2);
  adj_t *Wh1 = scratch + static_cast<size_t>(b) * (n1 + n2), *Wh2 = Wh1 + n1;  // Ŵ = ∂L/∂W_{t+1}
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  for (int t = s - 1; t >= 0; t--) {
    nlk::load_token(sm, d, t, K + b * sd, V + b * sd, Q + b * sd, DY + b * sd);
    __syncthreads();
    const size_t c1 = static_cast<size_t>(t) * n1, c2 = static_cast<size_t>(t) * n2;
    const acc_t al = alpha[gs + t], th = theta[gs + t];
    nlk::read_vjp(sm, d, dh, W1 + c1 + n1, W2 + c2 + n2, Wh1, Wh2, true, dq + static_cast<size_t>(t) * d);
    nlk::inner_gradient(sm, d, dh, W1 + c1, W2 + c2, bias);
    nlk::chain_in(sm, d, dh, Wh1, Wh2);
    // dα = ⟨Ŵ, W_t⟩ ; dθ = −(⟨Ŵ, G_t⟩ + 2λ_loc (⟨Ŵ, W_t⟩ − ⟨Ŵ, B⟩) + 2λ₂ ⟨Ŵ, W_t⟩)
    acc_t hw = 0, hb = 0;
    for (int i = tid; i < n1; i += nt) {
      hw += Wh1[i] * W1[c1 + i];
      hb += Wh1[i] * W1[i];
    }
    for (int i = tid; i < n2; i += nt) {
      hw += Wh2[i] * W2[c2 + i];
      hb += Wh2[i] * W2[i];
    }
    sm.red[tid] = hw;
    sm.red[nt + tid] = hb;
    nlk::block_sums(sm.red, 2);
    if (tid == 0) {
      const acc_t w = sm.red[0], bb = sm.red[nt];
      dalpha[gs + t] = static_cast<float>(w);
      dtheta[gs + t] = static_cast<float>(-(nlk::inner_grad_dot(sm, d, dh) + 2.0 * hp.lloc * (w - bb) + 2.0 * hp.l2 * w));
    }
    const adj_t keep = al - th * (2.0 * hp.lloc + 2.0 * hp.l2);
    for (int i = tid; i < n1; i += nt) Wh1[i] *= keep;
    for (int i = tid; i < n2; i += nt) Wh2[i] *= keep;
    __syncthreads();
    nlk::chain_out(sm, d, dh, -th, W1 + c1, W2 + c2, Wh1, Wh2, bias, dk + static_cast<size_t>(t) * d,
                   dv + static_cast<size_t>(t) * d);
  }
}

int check_hyper(int dh, double delta, double lloc, double l2) {
  if (!nlk::valid_hidden(dh)) return NLK_ERR_BAD_SIZE;
  if (!(delta > 0.0) || !(lloc >= 0.0) || !(l2 >= 0.0)) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_yaad_forward(int B, int s, int d, int d_hidden, double delta, double lambda_local, double lambda_2,
                             const float* k, const float* v, const float* q, const float* alpha, const float* theta,
                             const float* W1_0, const float* W2_0, float* y, float* W1, float* W2, float* w1States,
                             float* w2States) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d_hidden, delta, lambda_local, lambda_2)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, W1_0, W2_0, y, W1, W2, w1States, w2States);
  const Hyper hp{d_hidden, delta, lambda_local, lambda_2};
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
  NLK_LAUNCH(yaad_forward_kernel, B, nt, smem)(s, d, hp, gk, gv, gq, ga, gt, g1, g2, oy, o1, o2, os1, os2);
  return call.finish();
}

NLK_API int nlk_yaad_backward(int B, int s, int d, int d_hidden, double delta, double lambda_local, double lambda_2,
                              const float* k, const float* v, const float* q, const float* alpha, const float* theta,
                              const float* w1States, const float* w2States, const float* dy, float* dk, float* dv,
                              float* dq, float* dalpha, float* dtheta) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d_hidden, delta, lambda_local, lambda_2)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, w1States, w2States, dy, dk, dv, dq, dalpha, dtheta);
  const Hyper hp{d_hidden, delta, lambda_local, lambda_2};
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d_hidden;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *g1 = call.in(w1States, ns), *g2 = call.in(w2States, ns), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g),
        *odt = call.out(dtheta, g);
  adj_t* scratch = call.scratch<adj_t>(static_cast<size_t>(B) * 2 * d * d_hidden);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::mlp_threads(d, d_hidden);
  const size_t smem = nlk::smem_bytes<nlk::MlpSmem>(d, d_hidden, nt);
  call.start();
  NLK_LAUNCH(yaad_backward_kernel, B, nt, smem)(s, d, hp, gk, gv, gq, ga, gt, g1, g2, gdy, odk, odv, odq, oda, odt,
                                                 scratch);
  return call.finish();
}

}  // extern "C"
