/*
 * Atlas Omega kernel pair, implemented version, ABI v2 (docs/spec/titans-family.md#atlas-forward,
 * docs/spec/titans-family.md#atlas-backward, docs/spec/decisions.md#d8; reference src/rules/atlas.ts).
 * ω_t = W_omega silu([k_t; v_t]) is computed by the caller:
 *   S_{t+1} = η_t S_t − θ_t ω_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1} ;  y_t = M_{t+1} q_t
 * No error term: v is not read (and has no gradient: kernel.noGrad in src/rules/atlas.ts). One block
 * per sequence (b, h); threads own rows of M, S, D, E; checkpointing as in delta.cu (walk.cuh).
 */
#include "matrix.cuh"

namespace {

/** The token's k, ω, q. */
struct KwqSmem {
  float *k, *w, *q;
  __host__ __device__ KwqSmem() {}
  __host__ __device__ KwqSmem(nlk::Carver& c, int d) : k(c.take<float>(d)), w(c.take<float>(d)), q(c.take<float>(d)) {}
  __device__ void load(const nlk::Seq& sq, int t, const nlk::atlas::Inputs& in) const {
    const size_t o = sq.vec(t);
    const int d = static_cast<int>(sq.d);
    nlk::load_vec(k, in.k + o, d);
    nlk::load_vec(w, in.omega + o, d);
    nlk::load_vec(q, in.q + o, d);
  }
};

/** One token's update (the forward's and the replay's single body): S_next, M_next and y. */
NLK_NOINLINE __device__ void atlas_step(const float* Mt, const float* St, float* Mn, float* Sn, const KwqSmem& sm, float alpha, float theta,
                                        float eta, int d, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta, et = eta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const acc_t wi = -tht * sm.w[i];
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      // as the reference: the stored (rounded) S_{t+1} enters M_{t+1}
      const float sn = static_cast<float>(et * St[i * d + j] + wi * sm.k[j]);
      Sn[i * d + j] = sn;
      const float m = static_cast<float>(keep * Mt[i * d + j] + sn);
      Mn[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** The rule's step as the walk calls it: stage token t, (M_t, S_t) → (M_{t+1}, S_{t+1}) (and y when given); barriers before and after. */
__device__ void atlas_token(const nlk::atlas::Inputs& in, const nlk::Seq& sq, const KwqSmem& sm, int t, const float* const* cur,
                            float* const* next, float* y) {
  sm.load(sq, t, in);
  __syncthreads();
  const size_t g = sq.gate(t);
  atlas_step(cur[0], cur[1], next[0], next[1], sm, in.alpha[g], in.theta[g], in.eta[g], static_cast<int>(sq.d), y);
  __syncthreads();
}

struct BwdSmem {
  KwqSmem fw;
  float* dy;
  acc_t* red;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), dy(c.take<float>(d)), red(c.take<acc_t>(3 * static_cast<size_t>(nt))) {}
};

/** Token t's backward (v1's arithmetic): D, E carried from token t+1 to token t. */
__device__ void token_backward(const nlk::atlas::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, adj_t* E, const float* Mt, const float* St,
                               const float* Mn, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t), gi = sq.gate(t);
  sm.fw.load(sq, t, a.in);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  __syncthreads();
  const acc_t al = a.in.alpha[gi], tht = a.in.theta[gi], et = a.in.eta[gi];
  acc_t pa = 0, pe = 0, pth = 0;
  for (int i = tid; i < d; i += nt) {
    acc_t eki = 0;
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      const adj_t dij = D[ij] + static_cast<adj_t>(sm.dy[i]) * sm.fw.q[j];
      D[ij] = dij;
      const adj_t eij = E[ij] + dij;
      E[ij] = eij;
      pa += dij * Mt[ij];
      pe += static_cast<acc_t>(St[ij]) * eij;
      eki += eij * sm.fw.k[j];
    }
    pth += sm.fw.w[i] * eki;                            // dθ = −ωᵀ E k
    a.grad.domega[o + i] = static_cast<float>(-tht * eki);  // dω = −θ E k
  }
  sm.red[tid] = pa;
  sm.red[nt + tid] = pe;
  sm.red[2 * nt + tid] = pth;
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gw = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gq += static_cast<acc_t>(Mn[ij]) * sm.dy[i];
      gw += E[ij] * sm.fw.w[i];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-tht * gw);  // dk = −θ Eᵀ ω
  }
  if (tid == 0) {
    a.grad.dalpha[gi] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
    a.grad.deta[gi] = static_cast<float>(nlk::ordered_sum(sm.red, 1));
    a.grad.dtheta[gi] = static_cast<float>(-nlk::ordered_sum(sm.red, 2));
  }
  __syncthreads();
  const adj_t keep = 1.0 - al;
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      D[ij] *= keep;
      E[ij] *= et;
    }
  __syncthreads();
}

/** Atlas on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct Atlas : nlk::MatrixRule<nlk::atlas::ForwardArgs, nlk::atlas::BackwardArgs, 2, KwqSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "atlas_forward_kernel", *kBackwardName = "atlas_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* , float* y) const { atlas_token(in, sq, sm.fw, t, cur, next, y); }
  __device__ void token(int t, const float* const* before, const float* const* after, float*) const { token_backward(*b, sq, sm, adj[0], adj[1], before[0], before[1], after[0], t); }
};

}  // namespace

NLK_WALK_LAUNCHERS(atlas, Atlas)

#include "gen/atlas_pair.inc"
