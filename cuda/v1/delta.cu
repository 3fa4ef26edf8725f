/*
 * Delta rule kernel pair (docs/spec/titans-family.md#delta; reference src/rules/delta.ts):
 *   e_t = M_t k_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Threads own rows of M (and of the adjoint D = ∂L/∂M_{t+1} in the backward); products with
 * Mᵀ or Dᵀ are column loops that run after a barrier, when every row is final.
 */
#include "matrix.cuh"

namespace {

__global__ void delta_forward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ V,
                                     const float* __restrict__ Q, const float* __restrict__ alpha,
                                     const float* __restrict__ theta, const float* __restrict__ M0, float* __restrict__ Y,
                                     float* __restrict__ Mout, float* __restrict__ mStates, float* __restrict__ E) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::KvqSmem>(d);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d;
  const float *k = K + b * sd, *v = V + b * sd, *q = Q + b * sd, *al = alpha + static_cast<size_t>(b) * s,
              *th = theta + static_cast<size_t>(b) * s;
  float* Ms = nlk::start_states(mStates, M0, b, s, dd);
  float *y = Y + b * sd, *e = E + b * sd;
  for (int t = 0; t < s; t++) {
    sm.load(t, d, k, v, q);
    __syncthreads();
    const acc_t keep = 1.0 - static_cast<acc_t>(al[t]), tht = th[t];
    const float* Mt = Ms + t * dd;
    float* Mn = Ms + (t + 1) * dd;
    for (int i = tid; i < d; i += nt) {
      // rounded where the reference stores: e, (1 − α)M_t, and M_{t+1}
      const float ei = nlk::error_row(Mt, sm, i, d);
      e[t * d + i] = ei;
      const acc_t c = -tht * ei;
      acc_t read = 0;
      for (int j = 0; j < d; j++) {
        const float m = static_cast<float>(static_cast<float>(keep * Mt[i * d + j]) + c * sm.k[j]);
        Mn[i * d + j] = m;
        read += static_cast<acc_t>(m) * sm.q[j];
      }
      y[t * d + i] = static_cast<float>(read);
    }
    __syncthreads();  // the next token overwrites the shared vectors
  }
  nlk::store_final_state(Mout, Ms, b, s, dd);
}

__global__ void delta_backward_kernel(int s, int d, const float* __restrict__ K, const float* __restrict__ Q,
                                      const float* __restrict__ alpha, const float* __restrict__ theta,
                                      const float* __restrict__ mStates, const float* __restrict__ E,
                                      const float* __restrict__ DY, float* __restrict__ DK, float* __restrict__ DV,
                                      float* __restrict__ DQ, float* __restrict__ dalpha, float* __restrict__ dtheta,
                                      adj_t* __restrict__ Dscratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<nlk::ErrorBwdSmem>(d, nt, 2);
  const size_t dd = static_cast<size_t>(d) * d, sd = static_cast<size_t>(s) * d;
  const float *k = K + b * sd, *q = Q + b * sd, *e = E + b * sd, *dy = DY + b * sd;
  const float *al = alpha + static_cast<size_t>(b) * s, *th = theta + static_cast<size_t>(b) * s;
  const float* Ms = nlk::seq_states(mStates, b, s, dd);
  float *dk = DK + b * sd, *dv = DV + b * sd, *dq = DQ + b * sd;
  adj_t* D = Dscratch + b * dd;  // ∂L/∂M_{t+1}, zero on entry
  for (int t = s - 1; t >= 0; t--) {
    sm.load(t, d, dy, q, k, e);
    __syncthreads();
    const float a = al[t], tht = th[t];
    const float *Mt = Ms + t * dd, *Mn = Ms + (t + 1) * dd;
    acc_t pa = 0, pth = 0;
    for (int i = tid; i < d; i += nt) {
      // the read y_t = M_{t+1} q_t adds dy qᵀ; then dα = −⟨D, M_t⟩, dθ = −eᵀ D k
      acc_t dki = 0;
      for (int j = 0; j < d; j++) {
        const adj_t dij = D[i * d + j] + static_cast<adj_t>(sm.dy[i]) * sm.q[j];
        D[i * d + j] = dij;
        pa += dij * Mt[i * d + j];
        dki += dij * sm.k[j];
      }
      pth += sm.e[i] * dki;
      const acc_t dei = -tht * dki;
      sm.de[i] = dei;
      dv[t * d + i] = static_cast<float>(-dei);
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pth;
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, ge = 0, gm = 0;
      for (int i = 0; i < d; i++) {
        gq += Mn[i * d + j] * sm.dy[i];
        ge += D[i * d + j] * sm.e[i];
        gm += Mt[i * d + j] * sm.de[i];
      }
      dq[t * d + j] = static_cast<float>(gq);
      dk[t * d + j] = static_cast<float>(-tht * ge + gm);
    }
    if (tid == 0) {
      dalpha[static_cast<size_t>(b) * s + t] = -static_cast<float>(nlk::ordered_sum(sm.red, 0));
      dtheta[static_cast<size_t>(b) * s + t] = -static_cast<float>(nlk::ordered_sum(sm.red, 1));
    }
    __syncthreads();  // every column loop has read D before it is carried to M_t
    const adj_t keep = 1.0 - static_cast<adj_t>(a);
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) D[i * d + j] = keep * D[i * d + j] + sm.de[i] * sm.k[j];
    __syncthreads();
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_delta_forward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                              const float* theta, const float* M0, float* y, float* M, float* mStates, float* e) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, M0, y, M, mStates, e);
  const size_t sd = static_cast<size_t>(B) * s * d, dd = static_cast<size_t>(B) * d * d, g = static_cast<size_t>(B) * s;
  nlk::Call call;
  const float *dk_ = call.in(k, sd), *dv_ = call.in(v, sd), *dq_ = call.in(q, sd), *da = call.in(alpha, g),
              *dt = call.in(theta, g), *dm0 = call.in(M0, dd);
  float *dy = call.out(y, sd), *dm = call.out(M, dd), *dms = call.out(mStates, static_cast<size_t>(B) * (s + 1) * d * d),
        *de = call.out(e, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<nlk::KvqSmem>(d);
  call.start();
  NLK_LAUNCH(delta_forward_kernel, B, nt, smem)(s, d, dk_, dv_, dq_, da, dt, dm0, dy, dm, dms, de);
  return call.finish();
}

NLK_API int nlk_delta_backward(int B, int s, int d, const float* k, const float* v, const float* q, const float* alpha,
                               const float* theta, const float* mStates, const float* e, const float* dy, float* dk,
                               float* dv, float* dq, float* dalpha, float* dtheta) {
  NLK_REQUIRE_DIMS(B, s, d);
  NLK_REQUIRE_PTRS(k, v, q, alpha, theta, mStates, e, dy, dk, dv, dq, dalpha, dtheta);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g), *gt = call.in(theta, g),
              *gm = call.in(mStates, static_cast<size_t>(B) * (s + 1) * d * d), *ge = call.in(e, sd), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g),
        *odt = call.out(dtheta, g);
  adj_t* D = call.scratch<adj_t>(static_cast<size_t>(B) * d * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<nlk::ErrorBwdSmem>(d, nt, 2);
  call.start();
  NLK_LAUNCH(delta_backward_kernel, B, nt, smem)(s, d, gk, gq, ga, gt, gm, ge, gdy, odk, odv, odq, oda, odt, D);
  return call.finish();
}

}  // extern "C"
