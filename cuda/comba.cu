/*
 * Comba kernel pair, ABI v2 (docs/spec/titans-family.md#comba; reference src/rules/comba.ts;
 * contract docs/spec/kernel-abi.md). The correction reads the memory with a second key p:
 *   e_t = M_t p_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Laid out as delta.cu (sequential form only): one block per sequence (b, h), threads own rows of M
 * and of the adjoint D = ∂L/∂M_{t+1}; the token's p is staged beside k, v, q. The backward's column
 * pass reads D for dq and dk and M_t for dp before the row pass turns D into ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q and the token's second key p in shared memory. */
struct CombaSmem {
  nlk::KvqSmem kvq;
  float* p;
  __host__ __device__ CombaSmem() {}
  __host__ __device__ CombaSmem(nlk::Carver& c, int d) : kvq(c, d), p(c.take<float>(d)) {}
};

/**
 * One token of the forward, row by row: e = M_cur p − v, M_next = (1 − α) M_cur − θ e kᵀ (rounded
 * as the reference stores: e, (1 − α) M_t and M_{t+1}) and (when y is given) y = M_next q. One body
 * for the forward and the backward's replay. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void comba_step(const float* Mcur, float* Mnext, const CombaSmem& sm, float alpha, float theta, int d, float* e,
                                        float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta;
  const nlk::KvqSmem& kv = sm.kvq;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t pred = 0;
    for (int j = 0; j < d; j++) pred += static_cast<acc_t>(Mcur[i * d + j]) * sm.p[j];
    const float ei = static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(kv.v[i]));
    e[i] = ei;
    const acc_t c = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(static_cast<float>(keep * Mcur[i * d + j]) + c * kv.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q and p; M_cur → M_next (and y when given); barriers before and after. */
__device__ void comba_token(const nlk::comba::Inputs& in, const nlk::Seq& sq, const CombaSmem& sm, int t, const float* cur, float* next,
                            float* e, float* y) {
  sm.kvq.load(sq, t, in.k, in.v, in.q);
  nlk::load_vec(sm.p, in.p + sq.vec(t), static_cast<int>(sq.d));
  __syncthreads();
  comba_step(cur, next, sm, in.alpha[sq.gate(t)], in.theta[sq.gate(t)], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  CombaSmem fw;
  nlk::ErrorBwdSmem bw;
  float* p;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 2), p(c.take<float>(d)) {}
};

/** Token t's backward (docs/spec/titans-family.md#comba-backward): Mt = M_t, Mn = M_{t+1}, e = e_t; D carried to M_t. */
__device__ void token_backward(const nlk::comba::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt,
                               const float* Mn, const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  nlk::load_vec(sm.p, a.in.p + o, d);
  __syncthreads();
  const float al = a.in.alpha[sq.gate(t)], tht = a.in.theta[sq.gate(t)];
  const adj_t keep = 1.0 - static_cast<adj_t>(al);
  acc_t pa = 0, pth = 0;
  for (int i = tid; i < d; i += nt) {
    // the read y_t = M_{t+1} q_t adds dy qᵀ; dα = −⟨D, M_t⟩; dθ = −eᵀ D k; de = −θ D k
    acc_t dki = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(b.dy[i]) * b.q[j];
      D[i * d + j] = dij;
      dki += dij * b.k[j];
      pa += dij * Mt[i * d + j];
    }
    pth += b.e[i] * dki;
    const acc_t dei = -tht * dki;
    b.de[i] = dei;
    a.grad.dv[o + i] = static_cast<float>(-dei);
  }
  b.red[tid] = pa;
  b.red[nt + tid] = pth;
  __syncthreads();
  // columns: dq = M_{t+1}ᵀ dy ; dk = −θ Dᵀ e (the write) ; dp = M_tᵀ de (the prediction M_t p)
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, ge = 0, gm = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * b.dy[i];
      ge += D[i * d + j] * b.e[i];
      gm += Mt[i * d + j] * b.de[i];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-tht * ge);
    a.grad.dp[o + j] = static_cast<float>(gm);
  }
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
  // ∂L/∂M_t = (1 − α) D + de pᵀ
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) D[i * d + j] = keep * D[i * d + j] + b.de[i] * sm.p[j];
  if (tid == 0) {
    a.grad.dalpha[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 0));
    a.grad.dtheta[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 1));
  }
  __syncthreads();
}

/** Comba on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Comba : nlk::MatrixRule<nlk::comba::ForwardArgs, nlk::comba::BackwardArgs, 1, CombaSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "comba_forward_kernel", *kBackwardName = "comba_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    comba_token(in, sq, sm.fw, t, cur[0], next[0], e, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], e, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(comba, Comba)

#include "gen/comba_pair.inc"
