/*
 * Titans LMM kernel pair, ABI v2 (docs/spec/titans-family.md#titans-forward,
 * docs/spec/titans-family.md#titans-backward, docs/spec/decisions.md#d7; reference src/rules/titans.ts):
 *   e_t = M_t k_t − v_t ;  S_{t+1} = η_t S_t − θ_t e_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   y_t = M_{t+1} q_t
 * One block per sequence (b, h); threads own rows of M and S (and of the adjoints D = ∂L/∂M_{t+1},
 * E = ∂L/∂S_{t+1}); products with a transposed matrix are column loops after a barrier. Two state
 * tensors (w = 0: M, w = 1: S) go through the walk (walk.cuh) together.
 */
#include "matrix.cuh"

namespace {

/** One token's update (the forward's and the replay's single body): e, S_next, M_next and y. */
NLK_NOINLINE __device__ void titans_step(const float* Mt, const float* St, float* Mn, float* Sn, const nlk::KvqSmem& sm, float alpha,
                                         float theta, float eta, int d, float* e, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta, et = eta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float ei = nlk::error_row(Mt, sm, i, d);
    e[i] = ei;
    const acc_t g = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      // as the reference: S_{t+1} enters M_{t+1} before it is rounded for storage
      const acc_t sn = et * St[i * d + j] + g * sm.k[j];
      Sn[i * d + j] = static_cast<float>(sn);
      const float m = static_cast<float>(static_cast<float>(keep * Mt[i * d + j]) + sn);
      Mn[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** The rule's step as the walk calls it: stage token t, (M_t, S_t) → (M_{t+1}, S_{t+1}), e (and y when given); barriers before and after. */
__device__ void titans_token(const nlk::titans::Inputs& in, const nlk::Seq& sq, const nlk::KvqSmem& sm, int t, const float* const* cur,
                             float* const* next, float* e, float* y) {
  sm.load(sq, t, in.k, in.v, in.q);
  __syncthreads();
  const size_t g = sq.gate(t);
  titans_step(cur[0], cur[1], next[0], next[1], sm, in.alpha[g], in.theta[g], in.eta[g], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  nlk::KvqSmem fw;
  nlk::ErrorBwdSmem bw;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 3) {}
};

/** Token t's backward (v1's arithmetic): D, E carried from token t+1 to token t. */
__device__ void token_backward(const nlk::titans::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, adj_t* E, const float* Mt, const float* St,
                               const float* Mn, const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t), gi = sq.gate(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  __syncthreads();
  const acc_t al = a.in.alpha[gi], tht = a.in.theta[gi], et = a.in.eta[gi];
  acc_t pa = 0, pe = 0, pth = 0;
  for (int i = tid; i < d; i += nt) {
    acc_t eki = 0;
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      const adj_t dij = D[ij] + static_cast<adj_t>(b.dy[i]) * b.q[j];  // the read y_t = M_{t+1} q_t
      D[ij] = dij;
      const adj_t eij = E[ij] + dij;  // M_{t+1} = (1−α)M_t + S_{t+1}: S_{t+1} receives all of D
      E[ij] = eij;
      pa += dij * Mt[ij];
      pe += static_cast<acc_t>(St[ij]) * eij;
      eki += eij * b.k[j];
    }
    pth += b.e[i] * eki;
    const acc_t dei = -tht * eki;
    b.de[i] = dei;
    a.grad.dv[o + i] = static_cast<float>(-dei);
  }
  b.red[tid] = pa;
  b.red[nt + tid] = pe;
  b.red[2 * nt + tid] = pth;
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, ge = 0, gm = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gq += static_cast<acc_t>(Mn[ij]) * b.dy[i];
      ge += E[ij] * b.e[i];
      gm += static_cast<acc_t>(Mt[ij]) * b.de[i];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-tht * ge + gm);
  }
  if (tid == 0) {
    a.grad.dalpha[gi] = static_cast<float>(-nlk::ordered_sum(b.red, 0));
    a.grad.deta[gi] = static_cast<float>(nlk::ordered_sum(b.red, 1));
    a.grad.dtheta[gi] = static_cast<float>(-nlk::ordered_sum(b.red, 2));
  }
  __syncthreads();
  const adj_t keep = 1.0 - al;
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      D[ij] = keep * D[ij] + b.de[i] * b.k[j];
      E[ij] *= et;
    }
  __syncthreads();
}

/** Titans on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Titans : nlk::MatrixRule<nlk::titans::ForwardArgs, nlk::titans::BackwardArgs, 2, nlk::KvqSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "titans_forward_kernel", *kBackwardName = "titans_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const { titans_token(in, sq, sm.fw, t, cur, next, e, y); }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const { token_backward(*b, sq, sm, adj[0], adj[1], before[0], before[1], after[0], e, t); }
};

}  // namespace

NLK_WALK_LAUNCHERS(titans, Titans)

#include "gen/titans_pair.inc"
