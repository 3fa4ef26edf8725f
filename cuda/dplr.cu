/*
 * DPLR kernel pair (the generalized delta rule with a diagonal-plus-low-rank transition), ABI v2
 * (docs/spec/titans-family.md#dplr; reference src/rules/dplr.ts; contract docs/spec/kernel-abi.md):
 *   u_t = M_t a_t ;  M_{t+1} = M_t diag(1 − α_t) + u_t b_tᵀ + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * α is a channel gate, [B,T,H,d]; a and b are per-token vectors like k. Laid out as kda.cu: one
 * block per sequence (b, h), threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}; the walk's
 * per-token record holds u_t. The backward's column pass reads D and M_t for dq, dk, db, da and dα
 * before the row pass turns D into ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q, a, b and the token's α in shared memory. */
struct DplrSmem {
  nlk::KvqSmem kvq;
  float *a, *b, *al;
  __host__ __device__ DplrSmem() {}
  __host__ __device__ DplrSmem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)), b(c.take<float>(d)), al(c.take<float>(d)) {}
};

/**
 * One token of the forward, row by row: u = M_cur a (from the undecayed memory), then
 * M_next = M_cur diag(1 − α) + u bᵀ + v kᵀ, rounded where the reference stores (u, the decayed
 * entry, each outer-product add), and (when y is given) y = M_next q. One body for the forward and
 * the backward's replay. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void dplr_step(const float* Mcur, float* Mnext, const DplrSmem& sm, int d, float* u, float* y) {
  const nlk::KvqSmem& kv = sm.kvq;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t pred = 0;
    for (int j = 0; j < d; j++) pred += static_cast<acc_t>(Mcur[i * d + j]) * sm.a[j];
    const float ui = static_cast<float>(pred);
    u[i] = ui;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      float m = static_cast<float>((1.0 - static_cast<acc_t>(sm.al[j])) * Mcur[i * d + j]);
      m = static_cast<float>(m + static_cast<acc_t>(ui) * sm.b[j]);
      m = static_cast<float>(m + static_cast<acc_t>(kv.v[i]) * kv.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q, a, b and α_t; M_cur → M_next (and y when given); barriers before and after. */
__device__ void dplr_token(const nlk::dplr::Inputs& in, const nlk::Seq& sq, const DplrSmem& sm, int t, const float* cur, float* next,
                           float* u, float* y) {
  const int d = static_cast<int>(sq.d);
  sm.kvq.load(sq, t, in.k, in.v, in.q);
  nlk::load_vec(sm.a, in.a + sq.vec(t), d);
  nlk::load_vec(sm.b, in.b + sq.vec(t), d);
  nlk::load_vec(sm.al, in.alpha + sq.vec(t), d);
  __syncthreads();
  dplr_step(cur, next, sm, d, u, y);
  __syncthreads();
}

/** The backward's token vectors: the replay's DplrSmem, this token's inputs and u, and du = D b. */
struct BwdSmem {
  DplrSmem fw;
  float *dy, *q, *k, *v, *a, *b, *al, *u;
  acc_t* du;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int)
      : fw(c, d), dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(d)), v(c.take<float>(d)), a(c.take<float>(d)),
        b(c.take<float>(d)), al(c.take<float>(d)), u(c.take<float>(d)), du(c.take<acc_t>(d)) {}
};

/** Token t's backward (docs/spec/titans-family.md#dplr-backward): Mt = M_t, Mn = M_{t+1}, u = u_t; D carried to M_t. */
__device__ void token_backward(const nlk::dplr::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt,
                               const float* Mn, const float* u, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(sm.q, a.in.q + o, d);
  nlk::load_vec(sm.k, a.in.k + o, d);
  nlk::load_vec(sm.v, a.in.v + o, d);
  nlk::load_vec(sm.a, a.in.a + o, d);
  nlk::load_vec(sm.b, a.in.b + o, d);
  nlk::load_vec(sm.al, a.in.alpha + o, d);
  nlk::load_vec(sm.u, u, d);
  __syncthreads();
  // rows: D += dy qᵀ ; dv = D k ; du = D b
  for (int i = tid; i < d; i += nt) {
    acc_t gv = 0, gu = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(sm.dy[i]) * sm.q[j];
      D[i * d + j] = dij;
      gv += dij * sm.k[j];
      gu += dij * sm.b[j];
    }
    a.grad.dv[o + i] = static_cast<float>(gv);
    sm.du[i] = gu;
  }
  __syncthreads();
  // columns: dq = M_{t+1}ᵀ dy ; dk = Dᵀ v ; db = Dᵀ u ; da = M_tᵀ du ; dα_j = −Σ_i D_ij (M_t)_ij
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gk = 0, gb = 0, ga = 0, gal = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * sm.dy[i];
      gk += D[i * d + j] * sm.v[i];
      gb += D[i * d + j] * sm.u[i];
      ga += Mt[i * d + j] * sm.du[i];
      gal += D[i * d + j] * Mt[i * d + j];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(gk);
    a.grad.db[o + j] = static_cast<float>(gb);
    a.grad.da[o + j] = static_cast<float>(ga);
    a.grad.dalpha[o + j] = static_cast<float>(-gal);
  }
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
  // ∂L/∂M_t = D diag(1 − α) + du aᵀ
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) D[i * d + j] = (1.0 - static_cast<adj_t>(sm.al[j])) * D[i * d + j] + sm.du[i] * sm.a[j];
  __syncthreads();
}

/** DPLR on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Dplr : nlk::MatrixRule<nlk::dplr::ForwardArgs, nlk::dplr::BackwardArgs, 1, DplrSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "dplr_forward_kernel", *kBackwardName = "dplr_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* u, float* y) const {
    dplr_token(in, sq, sm.fw, t, cur[0], next[0], u, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* u) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], u, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(dplr, Dplr)

#include "gen/dplr_pair.inc"
