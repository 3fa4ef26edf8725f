/*
 * Atlas Omega kernel pair, implemented version (docs/spec/titans-family.md#atlas-forward, docs/spec/titans-family.md#atlas-backward, docs/spec/decisions.md#d8; reference
 * src/rules/atlas.ts). ω_t = W_omega silu([k_t; v_t]) is computed by the caller:
 *   S_{t+1} = η_t S_t − θ_t ω_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1} ;  y_t = M_{t+1} q_t
 * No error term: v is not read (and gets no gradient). Threads own rows of M, S, D, E.
 */
#include "common.cuh"

namespace {

struct FwdSmem {
  float *k, *w, *q;
  __host__ __device__ FwdSmem(nlk::Carver& c, int d) : k(c.take<float>(d)), w(c.take<float>(d)), q(c.take<float>(d)) {}
};

__global__ void atlas_forward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ Q,
                                     const float* __restrict__ alpha, const float* __restrict__ theta,
                                     const float* __restrict__ eta, const float* __restrict__ W,
                                     const float* __restrict__ M0, const float* __restrict__ S0, float* __restrict__ Y,
                                     float* __restrict__ Mout, float* __restrict__ Sout, float* __restrict__ mStates,
                                     float* __restrict__ sStates) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<FwdSmem>(d);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *q = Q + b * sd, *w = W + b * sd;
  float *Ms = nlk::start_states(mStates, M0, b, s, dd), *Ss = nlk::start_states(sStates, S0, b, s, dd);
  float* y = Y + b * sd;
  for (int t = 0; t < s; t++) {
    nlk::load_vec(sm.k, k + t * d, d);
    nlk::load_vec(sm.w, w + t * d, d);
    nlk::load_vec(sm.q, q + t * d, d);
    __syncthreads();
    const acc_t keep = 1.0 - static_cast<acc_t>(alpha[gs + t]), tht = theta[gs + t], et = eta[gs + t];
    const float *Mt = Ms + t * dd, *St = Ss + t * dd;
    float *Mn = Ms + (t + 1) * dd, *Sn = Ss + (t + 1) * dd;
    for (int i = tid; i < d; i += nt) {
      const acc_t wi = -tht * sm.w[i];
      acc_t read = 0;
      for (int j = 0; j < d; j++) {
        // as the reference: the stored (rounded) S_{t+1} enters M_{t+1}
        const float sn = static_cast<float>(et * St[i * d + j] + wi * sm.k[j]);
        Sn[i * d + j] = sn;
        const float m = static_cast<float>(keep * Mt[i * d + j] + sn);
        Mn[i * d + j] = m;
        read += static_cast<acc_t>(m) * sm.q[j];
      }
      y[t * d + i] = static_cast<float>(read);
    }
    __syncthreads();
  }
  nlk::store_final_state(Mout, Ms, b, s, dd);
  nlk::store_final_state(Sout, Ss, b, s, dd);
}

struct BwdSmem {
  float *dy, *q, *k, *w;
  acc_t* red;
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt)
      : dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(d)), w(c.take<float>(d)), red(c.take<acc_t>(3 * nt)) {}
};

__global__ void atlas_backward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ Q,
                                      const float* __restrict__ alpha, const float* __restrict__ theta,
                                      const float* __restrict__ eta, const float* __restrict__ W,
                                      const float* __restrict__ mStates, const float* __restrict__ sStates,
                                      const float* __restrict__ DY, float* __restrict__ DK, float* __restrict__ DQ,
                                      float* __restrict__ dalpha, float* __restrict__ dtheta, float* __restrict__ deta,
                                      float* __restrict__ DW, adj_t* __restrict__ Dall, adj_t* __restrict__ Eall) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<BwdSmem>(d, nt);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *q = Q + b * sd, *w = W + b * sd, *dy = DY + b * sd;
  const float *Ms = nlk::seq_states(mStates, b, s, dd), *Ss = nlk::seq_states(sStates, b, s, dd);
  float *dk = DK + b * sd, *dq = DQ + b * sd, *dw = DW + b * sd;
  adj_t *D = Dall + b * dd, *E = Eall + b * dd;
  for (int t = s - 1; t >= 0; t--) {
    nlk::load_vec(sm.dy, dy + t * d, d);
    nlk::load_vec(sm.q, q + t * d, d);
    nlk::load_vec(sm.k, k + t * d, d);
    nlk::load_vec(sm.w, w + t * d, d);
    __syncthreads();
    const acc_t a = alpha[gs + t], tht = theta[gs + t], et = eta[gs + t];
    const float *Mt = Ms + t * dd, *Mn = Ms + (t + 1) * dd, *St = Ss + t * dd;
    acc_t pa = 0, pe = 0, pth = 0;
    for (int i = tid; i < d; i += nt) {
      acc_t eki = 0;
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * sm.q[j];
        D[ij] = dij;
        const adj_t eij = E[ij] + dij;
        E[ij] = eij;
        pa += dij * Mt[ij];
        pe += static_cast<acc_t>(St[ij]) * eij;
        eki += eij * sm.k[j];
      }
      pth += sm.w[i] * eki;  // dθ = −ωᵀ E k
      dw[t * d + i] = static_cast<float>(-tht * eki);  // dω = −θ E k
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pe;
    sm.red[2 * nt + tid] = pth;
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, gw = 0;
      for (int i = 0; i < d; i++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
        gw += E[ij] * sm.w[i];
      }
      dq[t * d + j] = static_cast<float>(gq);
      dk[t * d + j] = static_cast<float>(-tht * gw);  // dk = −θ Eᵀ ω
    }
    if (tid == 0) {
      dalpha[gs + t] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
      deta[gs + t] = static_cast<float>(nlk::ordered_sum(sm.red, 1));
      dtheta[gs + t] = static_cast<float>(-nlk::ordered_sum(sm.red, 2));
    }
    __syncthreads();
    const adj_t keep = 1.0 - a;
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        D[ij] *= keep;
        E[ij] *= et;
      }
    __syncthreads();
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_atlas_forward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                              const float* theta, const float* eta, const float* omega, const float* M0,
                              const float* S0, float* y, float* M, float* S, float* mStates, float* sStates) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, eta, omega, M0, S0, y, M, S, mStates, sStates);
  const size_t sd = static_cast<size_t>(B) * s * d, dd = static_cast<size_t>(B) * d * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g), *gt = call.in(theta, g),
              *ge = call.in(eta, g), *gw = call.in(omega, sd), *gm0 = call.in(M0, dd), *gs0 = call.in(S0, dd);
  float *oy = call.out(y, sd), *om = call.out(M, dd), *os = call.out(S, dd), *oms = call.out(mStates, ns),
        *oss = call.out(sStates, ns);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<FwdSmem>(d);
  call.start();
  NLK_LAUNCH(atlas_forward_kernel, B, nt, smem)(s, d, gk, gq, ga, gt, ge, gw, gm0, gs0, oy, om, os, oms, oss);
  return call.finish();
}

NLK_API int nlk_atlas_backward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                               const float* theta, const float* eta, const float* omega, const float* mStates,
                               const float* sStates, const float* dy, float* dk, float* dq, float* dalpha,
                               float* dtheta, float* deta, float* domega) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, eta, omega, mStates, sStates, dy, dk, dq, dalpha, dtheta, deta, domega);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g), *gt = call.in(theta, g),
              *gh = call.in(eta, g), *gw = call.in(omega, sd), *gm = call.in(mStates, ns), *gs = call.in(sStates, ns),
              *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g), *odt = call.out(dtheta, g),
        *ode = call.out(deta, g), *odw = call.out(domega, sd);
  adj_t *D = call.scratch<adj_t>(static_cast<size_t>(B) * d * d), *E = call.scratch<adj_t>(static_cast<size_t>(B) * d * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<BwdSmem>(d, nt);
  call.start();
  NLK_LAUNCH(atlas_backward_kernel, B, nt, smem)(s, d, gk, gq, ga, gt, gh, gw, gm, gs, gdy, odk, odq, oda, odt, ode, odw,
                                                  D, E);
  return call.finish();
}

}  // extern "C"
