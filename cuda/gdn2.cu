/*
 * GDN2 kernel pair (Gated DeltaNet 2), ABI v2 (docs/spec/delta-family-2.md#gdn2; reference
 * src/rules/gdn2.ts; contract docs/spec/kernel-abi.md). KDA with the step split into an erase gate
 * b = θ per key channel and a write gate w = η per value channel:
 *   M̃_t = M_t diag(1 − α_t) ;  e_t = M̃_t (θ_t ⊙ k_t) − η_t ⊙ v_t ;  M_{t+1} = M̃_t − e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * α, θ and η are channel gates, [B,T,H,d] (sq.vec(t)). Laid out as kda.cu: one block per sequence
 * (b, h), threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}; the token's gate rows are
 * staged beside k, v, q. The backward's column pass reads D once for dq, dk, dα and dθ (a column of
 * M is a key channel) before the row pass turns D into ∂L/∂M_t; dv and dη come from the row pass.
 */
#include "matrix.cuh"

namespace {

/** k, v, q and the token's per-channel α, θ (erase) and η (write) in shared memory. */
struct Gdn2Smem {
  nlk::KvqSmem kvq;
  float *a, *b, *w;
  __host__ __device__ Gdn2Smem() {}
  __host__ __device__ Gdn2Smem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)), b(c.take<float>(d)), w(c.take<float>(d)) {}
  /** Token t of sequence `sq` (no barrier). */
  __device__ void load(const nlk::gdn2::Inputs& in, const nlk::Seq& sq, int t) const {
    kvq.load(sq, t, in.k, in.v, in.q);
    const int d = static_cast<int>(sq.d);
    nlk::load_vec(a, in.alpha + sq.vec(t), d);
    nlk::load_vec(b, in.theta + sq.vec(t), d);
    nlk::load_vec(w, in.eta + sq.vec(t), d);
  }
};

/**
 * One token of the forward, row by row: M̃ = M_cur diag(1 − α) (rounded as the reference stores
 * it), e = M̃ (b ⊙ k) − w ⊙ v, M_next = M̃ − e kᵀ and (when y is given) y = M_next q. One body for
 * the forward and the backward's replay. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void gdn2_step(const float* Mcur, float* Mnext, const Gdn2Smem& sm, int d, float* e, float* y) {
  const nlk::KvqSmem& kv = sm.kvq;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t pred = 0;
    for (int j = 0; j < d; j++) {
      const float mt = static_cast<float>((1.0 - static_cast<acc_t>(sm.a[j])) * Mcur[i * d + j]);
      Mnext[i * d + j] = mt;  // M̃_t's row, kept where M_{t+1}'s goes
      pred += static_cast<acc_t>(mt) * (static_cast<acc_t>(sm.b[j]) * kv.k[j]);
    }
    const float ei = static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(sm.w[i]) * kv.v[i]);
    e[i] = ei;
    const acc_t c = -static_cast<acc_t>(ei);
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(Mnext[i * d + j] + c * kv.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q and the gates; M_cur → M_next (and y when given); barriers before and after. */
__device__ void gdn2_token(const nlk::gdn2::Inputs& in, const nlk::Seq& sq, const Gdn2Smem& sm, int t, const float* cur, float* next,
                           float* e, float* y) {
  sm.load(in, sq, t);
  __syncthreads();
  gdn2_step(cur, next, sm, static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  Gdn2Smem fw;
  nlk::ErrorBwdSmem bw;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 1) {}
};

/** Token t's backward (docs/spec/delta-family-2.md#gdn2-backward): Mt = M_t, Mn = M_{t+1}, e = e_t; D carried to M_t. */
__device__ void token_backward(const nlk::gdn2::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn,
                               const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const Gdn2Smem& g = sm.fw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.e, e, d);
  g.load(a.in, sq, t);
  __syncthreads();
  const float* k = g.kvq.k;
  for (int i = tid; i < d; i += nt) {
    // the read y_t = M_{t+1} q_t adds dy qᵀ; g = D k = ∂L/∂(w ⊙ v); de = −g
    acc_t dki = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(b.dy[i]) * g.kvq.q[j];
      D[i * d + j] = dij;
      dki += dij * k[j];
    }
    a.grad.dv[o + i] = static_cast<float>(static_cast<acc_t>(g.w[i]) * dki);
    a.grad.deta[o + i] = static_cast<float>(static_cast<acc_t>(g.kvq.v[i]) * dki);
    b.de[i] = -dki;
  }
  __syncthreads();
  // columns (key channels): dq = M_{t+1}ᵀ dy ; h = (1 − α_j) M_tᵀ de ; dk = −Dᵀ e + b_j h ; dθ_j = k_j h ;
  // dα_j = −Σ_i (D + de (b ⊙ k)ᵀ)_{ij} (M_t)_{ij}
  for (int j = tid; j < d; j += nt) {
    const acc_t bk = static_cast<acc_t>(g.b[j]) * k[j];
    acc_t gq = 0, ge = 0, gm = 0, ga = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * b.dy[i];
      ge += D[i * d + j] * b.e[i];
      gm += Mt[i * d + j] * b.de[i];
      ga += (D[i * d + j] + b.de[i] * bk) * Mt[i * d + j];
    }
    const acc_t h = (1.0 - static_cast<acc_t>(g.a[j])) * gm;
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-ge + g.b[j] * h);
    a.grad.dtheta[o + j] = static_cast<float>(k[j] * h);
    a.grad.dalpha[o + j] = static_cast<float>(-ga);
  }
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++)
      D[i * d + j] = (1.0 - static_cast<adj_t>(g.a[j])) * (D[i * d + j] + b.de[i] * (static_cast<acc_t>(g.b[j]) * k[j]));
  __syncthreads();
}

/** GDN2 on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Gdn2 : nlk::MatrixRule<nlk::gdn2::ForwardArgs, nlk::gdn2::BackwardArgs, 1, Gdn2Smem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "gdn2_forward_kernel", *kBackwardName = "gdn2_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    gdn2_token(in, sq, sm.fw, t, cur[0], next[0], e, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], e, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(gdn2, Gdn2)

#include "gen/gdn2_pair.inc"
