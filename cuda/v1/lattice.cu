/*
 * Lattice OSR kernel pair (docs/spec/miras-compression.md#lattice; reference src/rules/lattice.ts): m
 * unit-norm slots, READ BEFORE WRITE.
 *   READ   w = softmax(S_t q_t) ;  y_t = Σ_i w_i S_t[i]
 *   WRITE  γ_i = σ(S_t[i]·k_t) ;  u_i = v | k | v − (S_t[i]·v) S_t[i]  (decode | encode | similarity)
 *          β = α_t γ_i ;  p_i = β S_t[i]·u_i ;  ũ_i = (1 − p_i) S_t[i] + β u_i
 *          S_{t+1}[i] = ũ_i / ‖ũ_i‖ if ‖ũ_i‖ > 1e-8 else S_t[i]
 * A thread owns a slot for the write and its VJP; rows of the read go over d.
 */
#include "common.cuh"

namespace {

constexpr double kFallback = 1e-8;
enum Variant { kDecode = 0, kEncode = 1, kSimilarity = 2 };

struct Smem {
  float *k, *v, *q, *dy, *w;  // [d] x4, [m]
  acc_t *rho, *scal;          // [m], per-slot scalars [4 m]
  acc_t* du;                  // [m d]
  __host__ __device__ Smem(nlk::Carver& c, int d, int m)
      : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)), dy(c.take<float>(d)), w(c.take<float>(m)),
        rho(c.take<acc_t>(m)), scal(c.take<acc_t>(4 * m)), du(c.take<acc_t>(static_cast<size_t>(m) * d)) {}
};

/** u_j of the write for slot row S (length d); sv = S·v for the similarity variant. */
__device__ inline acc_t write_vec(int variant, const float* S, const Smem& sm, acc_t sv, int j) {
  if (variant == kEncode) return sm.k[j];
  if (variant == kDecode) return sm.v[j];
  return static_cast<acc_t>(sm.v[j]) - sv * S[j];
}

__device__ inline acc_t dot_row(const float* S, const float* x, int d) {
  acc_t s = 0;
  for (int j = 0; j < d; j++) s += static_cast<acc_t>(S[j]) * x[j];
  return s;
}

/** The read at S (slots [m, d]) for sm.q: weights into sm.w and readW, y into y. Ends with a barrier. */
__device__ void read_slots(const Smem& sm, const float* S, int m, int d, float* readW, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int i = tid; i < m; i += nt) sm.rho[i] = dot_row(S + i * d, sm.q, d);
  __syncthreads();
  if (tid == 0) {
    acc_t mx = -INFINITY, sum = 0;
    for (int i = 0; i < m; i++) mx = sm.rho[i] > mx ? sm.rho[i] : mx;
    for (int i = 0; i < m; i++) sum += exp(sm.rho[i] - mx);
    for (int i = 0; i < m; i++) {
      const float wi = static_cast<float>(exp(sm.rho[i] - mx) / sum);
      sm.w[i] = wi;
      readW[i] = wi;
    }
  }
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t acc = 0;
    for (int i = 0; i < m; i++) acc += static_cast<acc_t>(sm.w[i]) * S[i * d + j];
    y[j] = static_cast<float>(acc);
  }
  __syncthreads();
}

__global__ void lattice_forward_kernel(int s, int d, int m, int variant, const float* __restrict__ K,
                                       const float* __restrict__ V, const float* __restrict__ Q,
                                       const float* __restrict__ alpha, const float* __restrict__ S0,
                                       float* __restrict__ Y, float* __restrict__ Sout, float* __restrict__ sStates,
                                       float* __restrict__ readW, float* __restrict__ gamma, float* __restrict__ pDot,
                                       float* __restrict__ uNorm) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<Smem>(d, m);
  const size_t md = static_cast<size_t>(m) * d, sd = static_cast<size_t>(s) * d, sm_ = static_cast<size_t>(s) * m;
  float* S = nlk::start_states(sStates, S0, b, s, md);
  for (int t = 0; t < s; t++) {
    nlk::load_vec(sm.k, K + b * sd + static_cast<size_t>(t) * d, d);
    nlk::load_vec(sm.v, V + b * sd + static_cast<size_t>(t) * d, d);
    nlk::load_vec(sm.q, Q + b * sd + static_cast<size_t>(t) * d, d);
    __syncthreads();
    const float *St = S + t * md;
    float* Sn = S + (t + 1) * md;
    const size_t ti = b * sm_ + static_cast<size_t>(t) * m;
    read_slots(sm, St, m, d, readW + ti, Y + b * sd + static_cast<size_t>(t) * d);
    const acc_t a = alpha[static_cast<size_t>(b) * s + t];
    for (int i = tid; i < m; i += nt) {
      const float* si = St + i * d;
      float* ni = Sn + i * d;
      const float g = static_cast<float>(nlk::sigmoid<acc_t>(dot_row(si, sm.k, d)));
      gamma[ti + i] = g;
      const acc_t sv = variant == kSimilarity ? dot_row(si, sm.v, d) : 0;
      const acc_t beta = a * g;
      acc_t su = 0;
      for (int j = 0; j < d; j++) su += static_cast<acc_t>(si[j]) * write_vec(variant, si, sm, sv, j);
      const float p = static_cast<float>(beta * su);
      pDot[ti + i] = p;
      acc_t nn = 0;
      for (int j = 0; j < d; j++) {
        const acc_t ut = (1.0 - static_cast<acc_t>(p)) * si[j] + beta * write_vec(variant, si, sm, sv, j);
        nn += ut * ut;
      }
      const float n = static_cast<float>(sqrt(nn));
      uNorm[ti + i] = n;
      for (int j = 0; j < d; j++) {
        const acc_t ut = (1.0 - static_cast<acc_t>(p)) * si[j] + beta * write_vec(variant, si, sm, sv, j);
        ni[j] = n > kFallback ? static_cast<float>(ut / n) : si[j];
      }
    }
    __syncthreads();
  }
  nlk::store_final_state(Sout, S, b, s, md);
}

__global__ void lattice_backward_kernel(int s, int d, int m, int variant, const float* __restrict__ K,
                                        const float* __restrict__ V, const float* __restrict__ Q,
                                        const float* __restrict__ alpha, const float* __restrict__ sStates,
                                        const float* __restrict__ readW, const float* __restrict__ gamma,
                                        const float* __restrict__ pDot, const float* __restrict__ uNorm,
                                        const float* __restrict__ DY, float* __restrict__ DK, float* __restrict__ DV,
                                        float* __restrict__ DQ, float* __restrict__ dalpha, adj_t* __restrict__ scratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const auto sm = nlk::carve_shared<Smem>(d, m);
  const size_t md = static_cast<size_t>(m) * d, sd = static_cast<size_t>(s) * d, sm_ = static_cast<size_t>(s) * m;
  const float* S = nlk::seq_states(sStates, b, s, md);
  adj_t* Sh = scratch + b * 2 * md;  // ∂L/∂S_{t+1}
  adj_t* P = Sh + md;                 // ∂L/∂S_t, built at token t
  // per-slot scalars in sm.scal: [0,m) dρ, [m,2m) dα share, [2m,3m) dσ-chain, [3m,4m) c2 (similarity)
  acc_t *drho = sm.scal, *da = sm.scal + m, *dsc = sm.scal + 2 * m, *c2 = sm.scal + 3 * m;
  for (int t = s - 1; t >= 0; t--) {
    const size_t o = b * sd + static_cast<size_t>(t) * d, ti = b * sm_ + static_cast<size_t>(t) * m;
    nlk::load_vec(sm.k, K + o, d);
    nlk::load_vec(sm.v, V + o, d);
    nlk::load_vec(sm.q, Q + o, d);
    nlk::load_vec(sm.dy, DY + o, d);
    nlk::load_vec(sm.w, readW + ti, m);
    __syncthreads();
    const float *St = S + t * md, *Sn = S + (t + 1) * md;
    const acc_t a = alpha[static_cast<size_t>(b) * s + t];
    // (read) dw_i = S_t[i]·dy ; dρ_i = w_i (dw_i − Σ w dw)
    for (int i = tid; i < m; i += nt) sm.rho[i] = dot_row(St + i * d, sm.dy, d);
    __syncthreads();
    if (tid == 0) {
      acc_t wdw = 0;
      for (int i = 0; i < m; i++) wdw += static_cast<acc_t>(sm.w[i]) * sm.rho[i];
      for (int i = 0; i < m; i++) drho[i] = sm.w[i] * (sm.rho[i] - wdw);
    }
    __syncthreads();
    for (int i = tid; i < m; i += nt) {
      const float *si = St + i * d, *ni = Sn + i * d;
      adj_t *Pi = P + i * d, *Shi = Sh + i * d;
      acc_t* dui = sm.du + static_cast<size_t>(i) * d;
      for (int j = 0; j < d; j++) Pi[j] = sm.w[i] * static_cast<acc_t>(sm.dy[j]) + drho[i] * sm.q[j];
      const acc_t n = uNorm[ti + i];
      if (!(n > kFallback)) {
        // the forward copied S_t[i]: ∂L/∂S_{t+1}[i] passes straight through (D2)
        for (int j = 0; j < d; j++) {
          Pi[j] += Shi[j];
          dui[j] = 0;
        }
        da[i] = dsc[i] = c2[i] = 0;
        continue;
      }
      // dũ = (Ŝ[i] − s'(s'·Ŝ[i])) / n with s' = S_{t+1}[i], recomputed where needed
      acc_t sh = 0;
      for (int j = 0; j < d; j++) sh += static_cast<acc_t>(ni[j]) * Shi[j];
      acc_t c = 0;
      for (int j = 0; j < d; j++) c += (Shi[j] - ni[j] * sh) / n * si[j];
      const acc_t g = gamma[ti + i], p = pDot[ti + i], beta = a * g;
      const acc_t sv = variant == kSimilarity ? dot_row(si, sm.v, d) : 0;
      acc_t ddu = 0;
      for (int j = 0; j < d; j++) {
        const acc_t dut = (Shi[j] - ni[j] * sh) / n, u = write_vec(variant, si, sm, sv, j);
        const acc_t ddelta = dut - c * si[j];
        Pi[j] += (1.0 - p) * dut - c * beta * u;
        ddu += ddelta * u;
        dui[j] = beta * ddelta;
      }
      da[i] = g * ddu;
      dsc[i] = a * ddu * g * (1.0 - g);
      acc_t cc = 0;
      if (variant == kSimilarity) {
        for (int j = 0; j < d; j++) cc += dui[j] * si[j];
        for (int j = 0; j < d; j++) Pi[j] -= sv * dui[j] + cc * sm.v[j];
      }
      c2[i] = cc;
      for (int j = 0; j < d; j++) Pi[j] += dsc[i] * sm.k[j];
    }
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, gk = 0, gv = 0;
      for (int i = 0; i < m; i++) {
        const acc_t sij = St[i * d + j], du = sm.du[static_cast<size_t>(i) * d + j];
        gq += drho[i] * sij;
        if (variant == kDecode) gv += du;
        else if (variant == kEncode) gk += du;
        else gv += du - c2[i] * sij;
        gk += dsc[i] * sij;
      }
      DQ[o + j] = static_cast<float>(gq);
      DK[o + j] = static_cast<float>(gk);
      DV[o + j] = static_cast<float>(gv);
    }
    if (tid == 0) {
      acc_t sa = 0;
      for (int i = 0; i < m; i++) sa += da[i];
      dalpha[static_cast<size_t>(b) * s + t] = static_cast<float>(sa);
    }
    __syncthreads();
    nlk::swap(Sh, P);
  }
}

int check_hyper(int m, int variant) {
  if (m < 1) return NLK_ERR_BAD_SIZE;
  if (variant < kDecode || variant > kSimilarity) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_lattice_forward(int B, int s, int d, int m_slots, int variant, const float* k, const float* v,
                                const float* q, const float* alpha, const float* S_0, float* y, float* S,
                                float* sStates, float* readW, float* gamma, float* pDot, float* uNorm) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(m_slots, variant)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, S_0, y, S, sStates, readW, gamma, pDot, uNorm);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s, md = static_cast<size_t>(B) * m_slots * d;
  const size_t sm = static_cast<size_t>(B) * s * m_slots;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gs0 = call.in(S_0, md);
  float *oy = call.out(y, sd), *os = call.out(S, md), *oss = call.out(sStates, static_cast<size_t>(B) * (s + 1) * m_slots * d),
        *ow = call.out(readW, sm), *og = call.out(gamma, sm), *op = call.out(pDot, sm), *on = call.out(uNorm, sm);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d > m_slots ? d : m_slots);
  const size_t smem = nlk::smem_bytes<Smem>(d, m_slots);
  call.start();
  NLK_LAUNCH(lattice_forward_kernel, B, nt, smem)(s, d, m_slots, variant, gk, gv, gq, ga, gs0, oy, os, oss, ow, og, op, on);
  return call.finish();
}

NLK_API int nlk_lattice_backward(int B, int s, int d, int m_slots, int variant, const float* k, const float* v,
                                 const float* q, const float* alpha, const float* sStates, const float* readW,
                                 const float* gamma, const float* pDot, const float* uNorm, const float* dy, float* dk,
                                 float* dv, float* dq, float* dalpha) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(m_slots, variant)) return st;
  NLK_REQUIRE_PTRS(k, v, q, alpha, sStates, readW, gamma, pDot, uNorm, dy, dk, dv, dq, dalpha);
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s, sm = static_cast<size_t>(B) * s * m_slots;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *ga = call.in(alpha, g),
              *gss = call.in(sStates, static_cast<size_t>(B) * (s + 1) * m_slots * d), *gw = call.in(readW, sm),
              *gg = call.in(gamma, sm), *gp = call.in(pDot, sm), *gn = call.in(uNorm, sm), *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *oda = call.out(dalpha, g);
  adj_t* scratch = call.scratch<adj_t>(static_cast<size_t>(B) * 2 * m_slots * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d > m_slots ? d : m_slots);
  const size_t smem = nlk::smem_bytes<Smem>(d, m_slots);
  call.start();
  NLK_LAUNCH(lattice_backward_kernel, B, nt, smem)(s, d, m_slots, variant, gk, gv, gq, ga, gss, gw, gg, gp, gn, gdy, odk,
                                                    odv, odq, oda, scratch);
  return call.finish();
}

}  // extern "C"
