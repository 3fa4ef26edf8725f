/*
 * Gated Delta kernel pair (Gated DeltaNet), ABI v2 (docs/spec/titans-family.md#gated-delta;
 * reference src/rules/gated_delta.ts; contract docs/spec/kernel-abi.md). Decay, then correct:
 *   M̃_t = (1 − α_t) M_t ;  e_t = M̃_t k_t − v_t ;  M_{t+1} = M̃_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Laid out as delta.cu: one block per sequence (b, h), threads own rows of M and of the adjoint
 * D = ∂L/∂M_{t+1}; column products run after a barrier. A thread's row of M̃_t is all its error
 * row needs, so the decay and the correction are one pass per row. The backward replays each
 * checkpoint chunk with the forward's own step (walk.cuh, matrix.cuh: MatrixRule), so its states are
 * the forward's bits.
 */
#include "matrix.cuh"

namespace {

/**
 * One token of the forward, row by row: M̃ = (1 − α) M_cur (rounded as the reference stores it),
 * e = M̃ k − v, M_next = M̃ − θ e kᵀ and (when y is given) y = M_next q. One body for the forward
 * and the backward's replay. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void gated_delta_step(const float* Mcur, float* Mnext, const nlk::KvqSmem& sm, float alpha, float theta,
                                              int d, float* e, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t pred = 0;
    for (int j = 0; j < d; j++) {
      const float mt = static_cast<float>(keep * Mcur[i * d + j]);
      Mnext[i * d + j] = mt;  // M̃_t's row, kept where M_{t+1}'s goes
      pred += static_cast<acc_t>(mt) * sm.k[j];
    }
    const float ei = static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(sm.v[i]));
    e[i] = ei;
    const acc_t c = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(Mnext[i * d + j] + c * sm.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q; M_cur → M_next (and y when given); barriers before and after. */
__device__ void gated_delta_token(const nlk::gated_delta::Inputs& in, const nlk::Seq& sq, const nlk::KvqSmem& sm, int t,
                                  const float* cur, float* next, float* e, float* y) {
  sm.load(sq, t, in.k, in.v, in.q);
  __syncthreads();
  gated_delta_step(cur, next, sm, in.alpha[sq.gate(t)], in.theta[sq.gate(t)], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  nlk::KvqSmem fw;
  nlk::ErrorBwdSmem bw;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 2) {}
};

/** Token t's backward (docs/spec/titans-family.md#gated-delta-backward): Mt = M_t, Mn = M_{t+1}, e = e_t; D carried to M_t. */
__device__ void token_backward(const nlk::gated_delta::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn,
                               const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  __syncthreads();
  const float al = a.in.alpha[sq.gate(t)], tht = a.in.theta[sq.gate(t)];
  const adj_t keep = 1.0 - static_cast<adj_t>(al);
  acc_t pth = 0;
  for (int i = tid; i < d; i += nt) {
    // the read y_t = M_{t+1} q_t adds dy qᵀ; dθ = −eᵀ D k; de = −θ D k
    acc_t dki = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(b.dy[i]) * b.q[j];
      D[i * d + j] = dij;
      dki += dij * b.k[j];
    }
    pth += b.e[i] * dki;
    const acc_t dei = -tht * dki;
    b.de[i] = dei;
    a.grad.dv[o + i] = static_cast<float>(-dei);
  }
  b.red[nt + tid] = pth;
  __syncthreads();
  nlk::error_columns(a.grad, o, b, D, Mn, Mt, tht, keep, d);  // dk's prediction term through M̃_t = (1 − α) M_t
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M̃_t
  acc_t pa = 0;
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) {
      // ∂L/∂M̃_t = D + de kᵀ ; dα = −⟨∂L/∂M̃_t, M_t⟩ ; ∂L/∂M_t = (1 − α) ∂L/∂M̃_t
      const adj_t dt = D[i * d + j] + b.de[i] * b.k[j];
      pa += dt * Mt[i * d + j];
      D[i * d + j] = keep * dt;
    }
  b.red[tid] = pa;
  __syncthreads();
  if (tid == 0) {
    a.grad.dalpha[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 0));
    a.grad.dtheta[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 1));
  }
  __syncthreads();
}

/** Gated Delta on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct GatedDelta : nlk::MatrixRule<nlk::gated_delta::ForwardArgs, nlk::gated_delta::BackwardArgs, 1, nlk::KvqSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "gated_delta_forward_kernel", *kBackwardName = "gated_delta_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    gated_delta_token(in, sq, sm.fw, t, cur[0], next[0], e, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], e, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(gated_delta, GatedDelta)

#include "gen/gated_delta_pair.inc"
