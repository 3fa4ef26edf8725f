/*
 * Hebbian kernel pair, ABI v2 (docs/spec/titans-family.md#hebbian; reference src/rules/hebbian.ts;
 * contract docs/spec/kernel-abi.md):
 *   M_{t+1} = (1 − α_t) M_t + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * One block per sequence (b, h); threads own rows of M and of the adjoint D = ∂L/∂M_{t+1}. The
 * checkpointing is the walk's (walk.cuh: walk_forward, walk_backward), as in delta.cu.
 */
#include "matrix.cuh"

namespace {

/** One token's update (the forward's and the replay's single body): M_next = (1 − α) M_cur + v kᵀ, y. */
NLK_NOINLINE __device__ void hebbian_step(const float* Mcur, float* Mnext, const nlk::KvqSmem& sm, float alpha, int d, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha);
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const acc_t vi = sm.v[i];
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(keep * Mcur[i * d + j] + vi * sm.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** The rule's step as the walk calls it: stage token t, M_t → M_{t+1} (and y when given), barriers before and after. */
__device__ void hebbian_token(const nlk::hebbian::Inputs& in, const nlk::Seq& sq, const nlk::KvqSmem& sm, int t, const float* const* cur,
                              float* const* next, float* y) {
  sm.load(sq, t, in.k, in.v, in.q);
  __syncthreads();
  hebbian_step(cur[0], next[0], sm, in.alpha[sq.gate(t)], static_cast<int>(sq.d), y);
  __syncthreads();
}

struct BwdSmem {
  nlk::KvqSmem fw;
  float* dy;
  acc_t* red;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), dy(c.take<float>(d)), red(c.take<acc_t>(nt)) {}
};

/** Token t's backward (v1's arithmetic): Mt = M_t, Mn = M_{t+1}; D carried to M_t. */
__device__ void token_backward(const nlk::hebbian::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  sm.fw.load(sq, t, a.in.k, a.in.v, a.in.q);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  __syncthreads();
  acc_t pa = 0;
  for (int i = tid; i < d; i += nt) {
    acc_t dvi = 0;
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * sm.fw.q[j];
      D[ij] = dij;
      pa += dij * Mt[ij];
      dvi += dij * sm.fw.k[j];  // the write v kᵀ: dv = D k
    }
    a.grad.dv[o + i] = static_cast<float>(dvi);
  }
  sm.red[tid] = pa;
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gk = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
      gk += D[ij] * sm.fw.v[i];  // dk = Dᵀ v
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(gk);
  }
  if (tid == 0) a.grad.dalpha[sq.gate(t)] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
  __syncthreads();
  const adj_t keep = 1.0 - static_cast<adj_t>(a.in.alpha[sq.gate(t)]);
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) D[static_cast<size_t>(i) * d + j] *= keep;
  __syncthreads();
}

/** Hebbian on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Hebbian : nlk::MatrixRule<nlk::hebbian::ForwardArgs, nlk::hebbian::BackwardArgs, 1, nlk::KvqSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "hebbian_forward_kernel", *kBackwardName = "hebbian_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* , float* y) const { hebbian_token(in, sq, sm.fw, t, cur, next, y); }
  __device__ void token(int t, const float* const* before, const float* const* after, float*) const { token_backward(*b, sq, sm, adj[0], before[0], after[0], t); }
};

}  // namespace

NLK_WALK_LAUNCHERS(hebbian, Hebbian)

#include "gen/hebbian_pair.inc"
