/*
 * RWKV-6 kernel pair, ABI v2 (docs/spec/linear-attention.md#rwkv6; reference src/rules/rwkv6.ts;
 * contract docs/spec/kernel-abi.md). GLA's per-channel decay, read before the write with a bonus
 * u = θ per key channel:
 *   b_t = Σ_j u_t[j] k_t[j] q_t[j] ;  y_t = M_t q_t + b_t v_t ;  M_{t+1} = M_t diag(1 − α_t) + v_t k_tᵀ
 * α and θ are channel gates, [B,T,H,d] (sq.vec(t)). Laid out as gla.cu: one block per sequence
 * (b, h), threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}; the token's α and u rows are
 * staged beside k, v, q, and every thread sums the scalars b_t and c_t = dy_tᵀ v_t itself, in index
 * order. The backward's column pass reads D once for dk and dα before the row pass turns D into ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q and the token's per-channel α and u in shared memory. */
struct Rwkv6Smem {
  nlk::KvqSmem kvq;
  float *a, *u;
  __host__ __device__ Rwkv6Smem() {}
  __host__ __device__ Rwkv6Smem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)), u(c.take<float>(d)) {}
  /** Token t of sequence `sq` (no barrier). */
  __device__ void load(const nlk::rwkv6::Inputs& in, const nlk::Seq& sq, int t) const {
    kvq.load(sq, t, in.k, in.v, in.q);
    nlk::load_vec(a, in.alpha + sq.vec(t), static_cast<int>(sq.d));
    nlk::load_vec(u, in.theta + sq.vec(t), static_cast<int>(sq.d));
  }
  /** The bonus weight b = Σ_j u_j k_j q_j. */
  __device__ acc_t bonus(int d) const {
    acc_t b = 0;
    for (int j = 0; j < d; j++) b += static_cast<acc_t>(u[j]) * kvq.k[j] * kvq.q[j];
    return b;
  }
};

/** One token (the forward's and the replay's single body): y = M_cur q + b v (when y is given), M_next = M_cur diag(1 − α) + v kᵀ. */
NLK_NOINLINE __device__ void rwkv6_step(const float* Mcur, float* Mnext, const Rwkv6Smem& sm, int d, float* y) {
  const nlk::KvqSmem& kv = sm.kvq;
  const acc_t b = sm.bonus(d);
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const acc_t vi = kv.v[i];
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      read += static_cast<acc_t>(Mcur[i * d + j]) * kv.q[j];
      Mnext[i * d + j] = static_cast<float>((1.0 - static_cast<acc_t>(sm.a[j])) * Mcur[i * d + j] + vi * kv.k[j]);
    }
    // the read is stored before the bonus is added, as the reference stores it
    if (y != nullptr) y[i] = static_cast<float>(static_cast<acc_t>(static_cast<float>(read)) + b * vi);
  }
}

struct BwdSmem {
  Rwkv6Smem fw;
  float* dy;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int) : fw(c, d), dy(c.take<float>(d)) {}
};

/** Token t's backward (docs/spec/linear-attention.md#rwkv6-backward): Mt = M_t; D carried from ∂L/∂M_{t+1} to ∂L/∂M_t. */
__device__ void token_backward(const nlk::rwkv6::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  const nlk::KvqSmem& kv = sm.fw.kvq;
  sm.fw.load(a.in, sq, t);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  __syncthreads();
  const acc_t b = sm.fw.bonus(d);
  acc_t c = 0;  // ∂L/∂b = dyᵀ v
  for (int i = 0; i < d; i++) c += static_cast<acc_t>(sm.dy[i]) * kv.v[i];
  // rows: dv = D k + b dy
  for (int i = tid; i < d; i += nt) {
    acc_t gv = 0;
    for (int j = 0; j < d; j++) gv += D[static_cast<size_t>(i) * d + j] * kv.k[j];
    a.grad.dv[o + i] = static_cast<float>(gv + b * sm.dy[i]);
  }
  // columns (key channels): dk = Dᵀ v + c u ⊙ q ; dq = M_tᵀ dy + c u ⊙ k ; du = c k ⊙ q ;
  // dα_j = −Σ_i D_ij (M_t)_ij
  for (int j = tid; j < d; j += nt) {
    acc_t gk = 0, gq = 0, ga = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gk += D[ij] * kv.v[i];
      gq += static_cast<acc_t>(Mt[ij]) * sm.dy[i];
      ga += D[ij] * Mt[ij];
    }
    const acc_t cu = c * sm.fw.u[j];
    a.grad.dk[o + j] = static_cast<float>(gk + cu * kv.q[j]);
    a.grad.dq[o + j] = static_cast<float>(gq + cu * kv.k[j]);
    a.grad.dtheta[o + j] = static_cast<float>(c * kv.k[j] * kv.q[j]);
    a.grad.dalpha[o + j] = static_cast<float>(-ga);
  }
  __syncthreads();  // every row and column loop has read D before it becomes ∂L/∂M_t
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      D[ij] = D[ij] * (1.0 - static_cast<adj_t>(sm.fw.a[j])) + static_cast<adj_t>(sm.dy[i]) * kv.q[j];
    }
  __syncthreads();
}

/** RWKV-6 on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Rwkv6 : nlk::MatrixRule<nlk::rwkv6::ForwardArgs, nlk::rwkv6::BackwardArgs, 1, Rwkv6Smem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "rwkv6_forward_kernel", *kBackwardName = "rwkv6_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float*, float* y) const {
    sm.fw.load(in, sq, t);
    __syncthreads();
    rwkv6_step(cur[0], next[0], sm.fw, static_cast<int>(sq.d), y);
    __syncthreads();
  }
  __device__ void token(int t, const float* const* before, const float* const*, float*) const {
    token_backward(*b, sq, sm, adj[0], before[0], t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(rwkv6, Rwkv6)

#include "gen/rwkv6_pair.inc"
