/*
 * GLA kernel pair (gated linear attention), ABI v2 (docs/spec/linear-attention.md#gla; reference
 * src/rules/gla.ts; contract docs/spec/kernel-abi.md). Hebbian with a decay per key channel:
 *   M_{t+1} = M_t diag(1 − α_t) + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * α is a channel gate, [B,T,H,d] (sq.vec(t)). Laid out as hebbian.cu: one block per sequence
 * (b, h), threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}; the token's α row is staged
 * beside k, v, q. The backward's column pass reads D once for dq, dk and dα (a column of M is a key
 * channel) before the row pass turns D into ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q and the token's per-channel α in shared memory. */
struct GlaSmem {
  nlk::KvqSmem kvq;
  float* a;
  __host__ __device__ GlaSmem() {}
  __host__ __device__ GlaSmem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)) {}
  /** Token t of sequence `sq` (no barrier). */
  __device__ void load(const nlk::gla::Inputs& in, const nlk::Seq& sq, int t) const {
    kvq.load(sq, t, in.k, in.v, in.q);
    nlk::load_vec(a, in.alpha + sq.vec(t), static_cast<int>(sq.d));
  }
};

/** One token's update (the forward's and the replay's single body): M_next = M_cur diag(1 − α) + v kᵀ, y. */
NLK_NOINLINE __device__ void gla_step(const float* Mcur, float* Mnext, const GlaSmem& sm, int d, float* y) {
  const nlk::KvqSmem& kv = sm.kvq;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const acc_t vi = kv.v[i];
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>((1.0 - static_cast<acc_t>(sm.a[j])) * Mcur[i * d + j] + vi * kv.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

struct BwdSmem {
  GlaSmem fw;
  float* dy;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int) : fw(c, d), dy(c.take<float>(d)) {}
};

/** Token t's backward (docs/spec/linear-attention.md#gla-backward): Mt = M_t, Mn = M_{t+1}; D carried to M_t. */
__device__ void token_backward(const nlk::gla::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  const nlk::KvqSmem& kv = sm.fw.kvq;
  sm.fw.load(a.in, sq, t);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  __syncthreads();
  for (int i = tid; i < d; i += nt) {
    acc_t dvi = 0;
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * kv.q[j];
      D[ij] = dij;
      dvi += dij * kv.k[j];  // the write v kᵀ: dv = D k
    }
    a.grad.dv[o + i] = static_cast<float>(dvi);
  }
  __syncthreads();
  // columns (key channels): dq = M_{t+1}ᵀ dy ; dk = Dᵀ v ; dα_j = −Σ_i D_ij (M_t)_ij
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gk = 0, ga = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
      gk += D[ij] * kv.v[i];
      ga += D[ij] * Mt[ij];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(gk);
    a.grad.dalpha[o + j] = static_cast<float>(-ga);
  }
  __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) D[static_cast<size_t>(i) * d + j] *= 1.0 - static_cast<adj_t>(sm.fw.a[j]);
  __syncthreads();
}

/** GLA on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Gla : nlk::MatrixRule<nlk::gla::ForwardArgs, nlk::gla::BackwardArgs, 1, GlaSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "gla_forward_kernel", *kBackwardName = "gla_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float*, float* y) const {
    sm.fw.load(in, sq, t);
    __syncthreads();
    gla_step(cur[0], next[0], sm.fw, static_cast<int>(sq.d), y);
    __syncthreads();
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float*) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(gla, Gla)

#include "gen/gla_pair.inc"
