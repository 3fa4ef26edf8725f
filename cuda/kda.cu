/*
 * KDA kernel pair (Kimi Delta Attention), ABI v2 (docs/spec/titans-family.md#kda; reference
 * src/rules/kda.ts; contract docs/spec/kernel-abi.md). Gated Delta with a decay per key channel:
 *   M̃_t = M_t diag(1 − α_t) ;  e_t = M̃_t k_t − v_t ;  M_{t+1} = M̃_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * α is a channel gate, [B,T,H,d] (sq.vec(t)), θ one value per token. Laid out as gated_delta.cu:
 * one block per sequence (b, h), threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}; the
 * token's α row is staged beside k, v, q. The backward's column pass reads D once for dq, dk and
 * dα (a column of M is a key channel) before the row pass turns D into ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q and the token's per-channel α in shared memory. */
struct KdaSmem {
  nlk::KvqSmem kvq;
  float* a;
  __host__ __device__ KdaSmem() {}
  __host__ __device__ KdaSmem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)) {}
};

/**
 * One token of the forward, row by row: M̃ = M_cur diag(1 − α) (rounded as the reference stores
 * it), e = M̃ k − v, M_next = M̃ − θ e kᵀ and (when y is given) y = M_next q. One body for the
 * forward and the backward's replay. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void kda_step(const float* Mcur, float* Mnext, const KdaSmem& sm, float theta, int d, float* e, float* y) {
  const acc_t tht = theta;
  const nlk::KvqSmem& kv = sm.kvq;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t pred = 0;
    for (int j = 0; j < d; j++) {
      const float mt = static_cast<float>((1.0 - static_cast<acc_t>(sm.a[j])) * Mcur[i * d + j]);
      Mnext[i * d + j] = mt;  // M̃_t's row, kept where M_{t+1}'s goes
      pred += static_cast<acc_t>(mt) * kv.k[j];
    }
    const float ei = static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(kv.v[i]));
    e[i] = ei;
    const acc_t c = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(Mnext[i * d + j] + c * kv.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q and α_t; M_cur → M_next (and y when given); barriers before and after. */
__device__ void kda_token(const nlk::kda::Inputs& in, const nlk::Seq& sq, const KdaSmem& sm, int t, const float* cur, float* next,
                          float* e, float* y) {
  sm.kvq.load(sq, t, in.k, in.v, in.q);
  nlk::load_vec(sm.a, in.alpha + sq.vec(t), static_cast<int>(sq.d));
  __syncthreads();
  kda_step(cur, next, sm, in.theta[sq.gate(t)], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  KdaSmem fw;
  nlk::ErrorBwdSmem bw;
  float* a;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 1), a(c.take<float>(d)) {}
};

/** Token t's backward (docs/spec/titans-family.md#kda-backward): Mt = M_t, Mn = M_{t+1}, e = e_t; D carried to M_t. */
__device__ void token_backward(const nlk::kda::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn,
                               const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  nlk::load_vec(sm.a, a.in.alpha + o, d);
  __syncthreads();
  const float tht = a.in.theta[sq.gate(t)];
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
  b.red[tid] = pth;
  __syncthreads();
  // columns (key channels): dq = M_{t+1}ᵀ dy ; dk = −θ Dᵀ e + (1 − α_j) M_tᵀ de ;
  // dα_j = −Σ_i (D + de kᵀ)_{ij} (M_t)_{ij}
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, ge = 0, gm = 0, ga = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * b.dy[i];
      ge += D[i * d + j] * b.e[i];
      gm += Mt[i * d + j] * b.de[i];
      ga += (D[i * d + j] + b.de[i] * b.k[j]) * Mt[i * d + j];
    }
    const acc_t keep = 1.0 - static_cast<acc_t>(sm.a[j]);
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-tht * ge + keep * gm);
    a.grad.dalpha[o + j] = static_cast<float>(-ga);
  }
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) D[i * d + j] = (1.0 - static_cast<adj_t>(sm.a[j])) * (D[i * d + j] + b.de[i] * b.k[j]);
  if (tid == 0) a.grad.dtheta[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 0));
  __syncthreads();
}

/** KDA on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Kda : nlk::MatrixRule<nlk::kda::ForwardArgs, nlk::kda::BackwardArgs, 1, KdaSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "kda_forward_kernel", *kBackwardName = "kda_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    kda_token(in, sq, sm.fw, t, cur[0], next[0], e, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], e, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(kda, Kda)

#include "gen/kda_pair.inc"
