/*
 * Hebbian kernel pair (docs/spec/titans-family.md#hebbian; reference src/rules/hebbian.ts):
 *   M_{t+1} = (1 − α_t) M_t + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}.
 */
#include "matrix.cuh"

namespace {

__global__ void hebbian_forward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ V,
                                       const float* __restrict__ Q, const float* __restrict__ alpha,
                                       const float* __restrict__ M0, float* __restrict__ Y, float* __restrict__ Mout,
                                       float* __restrict__ mStates) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::KvqSmem>(d);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd;
  float *Ms = nlk::start_states(mStates, M0, b, s, dd), *y = Y + b * sd;
  for (int t = 0; t < s; t++) {
    sm.load(t, d, k, v, q);
    __syncthreads();
    const acc_t keep = 1.0 - static_cast<acc_t>(alpha[gs + t]);
    const float* Mt = Ms + t * dd;
    float* Mn = Ms + (t + 1) * dd;
    for (int i = tid; i < d; i += nt) {
      const acc_t vi = sm.v[i];
      acc_t read = 0;
      for (int j = 0; j < d; j++) {
        const float m = static_cast<float>(keep * Mt[i * d + j] + vi * sm.k[j]);
        Mn[i * d + j] = m;
        read += static_cast<acc_t>(m) * sm.q[j];
      }
      y[t * d + i] = static_cast<float>(read);
    }
    __syncthreads();
  }
  nlk::store_final_state(Mout, Ms, b, s, dd);
}

struct BwdSmem {
  float *dy, *q, *k, *v;
  acc_t* red;
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt)
      : dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(d)), v(c.take<float>(d)), red(c.take<acc_t>(nt)) {}
};

__global__ void hebbian_backward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ V,
                                        const float* __restrict__ Q, const float* __restrict__ alpha,
                                        const float* __restrict__ mStates, const float* __restrict__ DY,
                                        float* __restrict__ DK, float* __restrict__ DV, float* __restrict__ DQ,
                                        float* __restrict__ dalpha, adj_t* __restrict__ Dall) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<BwdSmem>(d, nt);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd, *dy = DY + b * sd;
  const float* Ms = nlk::seq_states(mStates, b, s, dd);
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  adj_t* D = Dall + b * dd;
  for (int t = s - 1; t >= 0; t--) {
    nlk::load_vec(sm.dy, dy + t * d, d);
    nlk::load_vec(sm.q, q + t * d, d);
    nlk::load_vec(sm.k, k + t * d, d);
    nlk::load_vec(sm.v, v + t * d, d);
    __syncthreads();
    const float *Mt = Ms + t * dd, *Mn = Ms + (t + 1) * dd;
    acc_t pa = 0;
    for (int i = tid; i < d; i += nt) {
      acc_t dvi = 0;
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * sm.q[j];
        D[ij] = dij;
        pa += dij * Mt[ij];
        dvi += dij * sm.k[j];  // the write v kᵀ: dv = D k
      }
      dv[t * d + i] = static_cast<float>(dvi);
    }
    sm.red[tid] = pa;
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, gk = 0;
      for (int i = 0; i < d; i++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
        gk += D[ij] * sm.v[i];  // dk = Dᵀ v
      }
      dq[t * d + j] = static_cast<float>(gq);
      dk[t * d + j] = static_cast<float>(gk);
    }
    if (tid == 0) dalpha[gs + t] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
    __syncthreads();
    const adj_t keep = 1.0 - static_cast<adj_t>(alpha[gs + t]);
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) D[static_cast<size_t>(i) * d + j] *= keep;
    __syncthreads();
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_hebbian_forward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                                const float* M0, float* y, float* M, float* mStates) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, M0, y, M, mStates);
  const size_t sd = static_cast<size_t>(B) * s * d, dd = static_cast<size_t>(B) * d * d, g = static_cast<size_t>(B) * s;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gm0 = call.in(M0, dd);
  float *oy = call.out(y, sd), *om = call.out(M, dd), *oms = call.out(mStates, static_cast<size_t>(B) * (s + 1) * d * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<nlk::KvqSmem>(d);
  call.start();
  NLK_LAUNCH(hebbian_forward_kernel, B, nt, smem)(s, d, gk, gv, gq, ga, gm0, oy, om, oms);
  return call.finish();
}

NLK_API int nlk_hebbian_backward(int B, int s, int d, const float* k, const float* v, const float* q,
                                 const float* alpha, const float* mStates, const float* dy, float* dk, float* dv,
                                 float* dq, float* dalpha) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, mStates, dy, dk, dv, dq, dalpha);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gm = call.in(mStates, static_cast<size_t>(B) * (s + 1) * d * d), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g);
  adj_t* D = call.scratch<adj_t>(static_cast<size_t>(B) * d * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<BwdSmem>(d, nt);
  call.start();
  NLK_LAUNCH(hebbian_backward_kernel, B, nt, smem)(s, d, gk, gv, gq, ga, gm, gdy, odk, odv, odq, oda, D);
  return call.finish();
}

}  // extern "C"
