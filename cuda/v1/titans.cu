/*
 * Titans LMM kernel pair (docs/spec/titans-family.md#titans-forward, docs/spec/titans-family.md#titans-backward, docs/spec/decisions.md#d7; reference src/rules/titans.ts):
 *   e_t = M_t k_t − v_t ;  S_{t+1} = η_t S_t − θ_t e_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   y_t = M_{t+1} q_t
 * Threads own rows of M and S (and of the adjoints D = ∂L/∂M_{t+1}, E = ∂L/∂S_{t+1}); products
 * with a transposed matrix are column loops after a barrier.
 */
#include "matrix.cuh"

namespace {

__global__ void titans_forward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ V,
                                      const float* __restrict__ Q, const float* __restrict__ alpha,
                                      const float* __restrict__ theta, const float* __restrict__ eta,
                                      const float* __restrict__ M0, const float* __restrict__ S0, float* __restrict__ Y,
                                      float* __restrict__ Mout, float* __restrict__ Sout, float* __restrict__ mStates,
                                      float* __restrict__ sStates, float* __restrict__ E) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::KvqSmem>(d);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd;
  float *Ms = nlk::start_states(mStates, M0, b, s, dd), *Ss = nlk::start_states(sStates, S0, b, s, dd);
  float *y = Y + b * sd, *e = E + b * sd;
  for (int t = 0; t < s; t++) {
    sm.load(t, d, k, v, q);
    __syncthreads();
    const acc_t keep = 1.0 - static_cast<acc_t>(alpha[gs + t]), tht = theta[gs + t], et = eta[gs + t];
    const float *Mt = Ms + t * dd, *St = Ss + t * dd;
    float *Mn = Ms + (t + 1) * dd, *Sn = Ss + (t + 1) * dd;
    for (int i = tid; i < d; i += nt) {
      const float ei = nlk::error_row(Mt, sm, i, d);
      e[t * d + i] = ei;
      const acc_t g = -tht * ei;
      acc_t read = 0;
      for (int j = 0; j < d; j++) {
        // as the reference: S_{t+1} enters M_{t+1} before it is rounded for storage
        const acc_t sn = et * St[i * d + j] + g * sm.k[j];
        Sn[i * d + j] = static_cast<float>(sn);
        const float m = static_cast<float>(static_cast<float>(keep * Mt[i * d + j]) + sn);
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

__global__ void titans_backward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ Q,
                                       const float* __restrict__ alpha, const float* __restrict__ theta,
                                       const float* __restrict__ eta, const float* __restrict__ mStates,
                                       const float* __restrict__ sStates, const float* __restrict__ Ev,
                                       const float* __restrict__ DY, float* __restrict__ DK, float* __restrict__ DV,
                                       float* __restrict__ DQ, float* __restrict__ dalpha, float* __restrict__ dtheta,
                                       float* __restrict__ deta, adj_t* __restrict__ Dall, adj_t* __restrict__ Eall) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::ErrorBwdSmem>(d, nt, 3);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d, gs = static_cast<size_t>(b) * s;
  const float *k = K + b * sd, *q = Q + b * sd, *ev = Ev + b * sd, *dy = DY + b * sd;
  const float *Ms = nlk::seq_states(mStates, b, s, dd), *Ss = nlk::seq_states(sStates, b, s, dd);
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  adj_t *D = Dall + b * dd, *E = Eall + b * dd;  // ∂L/∂M_{t+1}, ∂L/∂S_{t+1}
  for (int t = s - 1; t >= 0; t--) {
    sm.load(t, d, dy, q, k, ev);
    __syncthreads();
    const acc_t a = alpha[gs + t], tht = theta[gs + t], et = eta[gs + t];
    const float *Mt = Ms + t * dd, *Mn = Ms + (t + 1) * dd, *St = Ss + t * dd;
    acc_t pa = 0, pe = 0, pth = 0;
    for (int i = tid; i < d; i += nt) {
      acc_t eki = 0;
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * sm.q[j];  // the read y_t = M_{t+1} q_t
        D[ij] = dij;
        const adj_t eij = E[ij] + dij;  // M_{t+1} = (1−α)M_t + S_{t+1}: S_{t+1} receives all of D
        E[ij] = eij;
        pa += dij * Mt[ij];
        pe += static_cast<acc_t>(St[ij]) * eij;
        eki += eij * sm.k[j];
      }
      pth += sm.e[i] * eki;
      const acc_t dei = -tht * eki;
      sm.de[i] = dei;
      dv[t * d + i] = static_cast<float>(-dei);
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pe;
    sm.red[2 * nt + tid] = pth;
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, ge = 0, gm = 0;
      for (int i = 0; i < d; i++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
        ge += E[ij] * sm.e[i];
        gm += static_cast<acc_t>(Mt[ij]) * sm.de[i];
      }
      dq[t * d + j] = static_cast<float>(gq);
      dk[t * d + j] = static_cast<float>(-tht * ge + gm);
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
        D[ij] = keep * D[ij] + sm.de[i] * sm.k[j];
        E[ij] *= et;
      }
    __syncthreads();
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_titans_forward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                               const float* theta, const float* eta, const float* M0, const float* S0, float* y,
                               float* M, float* S, float* mStates, float* sStates, float* e) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, eta, M0, S0, y, M, S, mStates, sStates, e);
  const size_t sd = static_cast<size_t>(B) * s * d, dd = static_cast<size_t>(B) * d * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gt = call.in(theta, g), *ge = call.in(eta, g), *gm0 = call.in(M0, dd), *gs0 = call.in(S0, dd);
  float *oy = call.out(y, sd), *om = call.out(M, dd), *os = call.out(S, dd), *oms = call.out(mStates, ns),
        *oss = call.out(sStates, ns), *oe = call.out(e, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<nlk::KvqSmem>(d);
  call.start();
  NLK_LAUNCH(titans_forward_kernel, B, nt, smem)(s, d, gk, gv, gq, ga, gt, ge, gm0, gs0, oy, om, os, oms, oss, oe);
  return call.finish();
}

NLK_API int nlk_titans_backward(int B, int s, int d, const float* k, const float* v, const float* q,
                                const float* alpha, const float* theta, const float* eta, const float* mStates,
                                const float* sStates, const float* e, const float* dy, float* dk, float* dv, float* dq,
                                float* dalpha, float* dtheta, float* deta) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, eta, mStates, sStates, e, dy, dk, dv, dq, dalpha, dtheta, deta);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d * d;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g), *gt = call.in(theta, g),
              *gh = call.in(eta, g), *gm = call.in(mStates, ns), *gs = call.in(sStates, ns), *ge = call.in(e, sd),
              *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g),
        *odt = call.out(dtheta, g), *ode = call.out(deta, g);
  adj_t *D = call.scratch<adj_t>(static_cast<size_t>(B) * d * d), *E = call.scratch<adj_t>(static_cast<size_t>(B) * d * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<nlk::ErrorBwdSmem>(d, nt, 3);
  call.start();
  NLK_LAUNCH(titans_backward_kernel, B, nt, smem)(s, d, gk, gq, ga, gt, gh, gm, gs, ge, gdy, odk, odv, odq, oda, odt,
                                                   ode, D, E);
  return call.finish();
}

}  // extern "C"
