/*
 * Gated Oja kernel pair, ABI v2 (docs/spec/delta-family-2.md#gated-oja; reference
 * src/rules/gated_oja.ts; contract docs/spec/kernel-abi.md). The memory reconstructs the key from
 * the value; the decay is per value channel (a row of M):
 *   M̃_t = diag(1 − α_t) M_t ;  ε_t = M̃_tᵀ v_t − k_t ;  M_{t+1} = M̃_t − θ_t v_t ε_tᵀ ;  y_t = M_{t+1} q_t
 * α is a channel gate, [B,T,H,d] (sq.vec(t)), θ one value per token. One block per sequence (b, h).
 * ε reads a column of M̃, so a token's forward is a column pass (threads own key channels: ε into
 * shared memory and the record) and, after a barrier, a row pass (threads own rows of M: the decay,
 * the write and y). The backward's row pass adds dy qᵀ to the adjoint D = ∂L/∂M_{t+1} and sums D ε;
 * its column pass gives dq, dε = −θ Dᵀ v and dk; a second row pass gives dv, dα and ∂L/∂M_t.
 */
#include "matrix.cuh"

namespace {

/** k, v, q, the token's per-channel α and ε in shared memory. */
struct OjaSmem {
  nlk::KvqSmem kvq;
  float *a, *eps;
  __host__ __device__ OjaSmem() {}
  __host__ __device__ OjaSmem(nlk::Carver& c, int d) : kvq(c, d), a(c.take<float>(d)), eps(c.take<float>(d)) {}
};

/**
 * One token of the forward: ε = M̃ᵀ v − k by columns (M̃ = diag(1 − α) M_cur rounded as the
 * reference stores it), then by rows M_next = M̃ − θ v εᵀ and (when y is given) y = M_next q. One
 * body for the forward and the backward's replay. The caller has staged the token in sm (barrier
 * done); the barrier between the passes is here.
 */
NLK_NOINLINE __device__ void oja_step(const float* Mcur, float* Mnext, const OjaSmem& sm, float theta, int d, float* e, float* y) {
  const nlk::KvqSmem& kv = sm.kvq;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    acc_t rec = 0;
    for (int i = 0; i < d; i++) {
      const float mt = static_cast<float>((1.0 - static_cast<acc_t>(sm.a[i])) * Mcur[i * d + j]);
      rec += static_cast<acc_t>(mt) * kv.v[i];
    }
    const float ej = static_cast<float>(static_cast<float>(rec) - static_cast<acc_t>(kv.k[j]));
    e[j] = ej;
    sm.eps[j] = ej;
  }
  __syncthreads();
  const acc_t tht = theta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const acc_t keep = 1.0 - static_cast<acc_t>(sm.a[i]);
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float mt = static_cast<float>(keep * Mcur[i * d + j]);
      const float m = static_cast<float>(mt + (-tht * sm.eps[j]) * kv.v[i]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * kv.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q and α_t; M_cur → M_next (and y when given); barriers before and after. */
__device__ void oja_token(const nlk::gated_oja::Inputs& in, const nlk::Seq& sq, const OjaSmem& sm, int t, const float* cur, float* next,
                          float* e, float* y) {
  sm.kvq.load(sq, t, in.k, in.v, in.q);
  nlk::load_vec(sm.a, in.alpha + sq.vec(t), static_cast<int>(sq.d));
  __syncthreads();
  oja_step(cur, next, sm, in.theta[sq.gate(t)], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

struct BwdSmem {
  OjaSmem fw;
  nlk::ErrorBwdSmem bw;
  float* v;
  acc_t* de;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 1), v(c.take<float>(d)), de(c.take<acc_t>(d)) {}
};

/** Token t's backward (docs/spec/delta-family-2.md#gated-oja-backward): Mt = M_t, Mn = M_{t+1}, e = ε_t; D carried to M_t. */
__device__ void token_backward(const nlk::gated_oja::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, const float* Mt, const float* Mn,
                               const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(sm.v, a.in.v + o, d);
  nlk::load_vec(b.e, e, d);
  nlk::load_vec(sm.fw.a, a.in.alpha + o, d);
  __syncthreads();
  const acc_t tht = a.in.theta[sq.gate(t)];
  acc_t pth = 0;
  for (int i = tid; i < d; i += nt) {
    // rows: the read y_t = M_{t+1} q_t adds dy qᵀ; (D ε)_i; dθ = −vᵀ D ε
    acc_t dei = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(b.dy[i]) * b.q[j];
      D[i * d + j] = dij;
      dei += dij * b.e[j];
    }
    b.de[i] = dei;  // (D ε)_i until the column pass is done
    pth += sm.v[i] * dei;
  }
  b.red[tid] = pth;
  __syncthreads();
  // columns (key channels): dq = M_{t+1}ᵀ dy ; dε = −θ Dᵀ v ; dk = −dε
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gv = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * b.dy[i];
      gv += D[i * d + j] * sm.v[i];
    }
    const acc_t dej = -tht * gv;
    sm.de[j] = dej;
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-dej);
  }
  __syncthreads();
  // rows (value channels): dv = −θ D ε + (1 − α_i) M_t dε ; dα_i = −Σ_j (D + v dεᵀ)_{ij} (M_t)_{ij} ;
  // ∂L/∂M_t = diag(1 − α) (D + v dεᵀ)
  for (int i = tid; i < d; i += nt) {
    const acc_t keep = 1.0 - static_cast<acc_t>(sm.fw.a[i]);
    acc_t gm = 0, ga = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dt = D[i * d + j] + sm.de[j] * sm.v[i];
      gm += Mt[i * d + j] * sm.de[j];
      ga += dt * Mt[i * d + j];
      D[i * d + j] = keep * dt;
    }
    a.grad.dv[o + i] = static_cast<float>(-tht * b.de[i] + keep * gm);
    a.grad.dalpha[o + i] = static_cast<float>(-ga);
  }
  if (tid == 0) a.grad.dtheta[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 0));
  __syncthreads();
}

/** The gated Oja rule on the walk (walk.cuh, matrix.cuh: MatrixRule). */
struct GatedOja : nlk::MatrixRule<nlk::gated_oja::ForwardArgs, nlk::gated_oja::BackwardArgs, 1, OjaSmem, BwdSmem> {
  using MatrixRule::MatrixRule;
  static constexpr const char *kForwardName = "gated_oja_forward_kernel", *kBackwardName = "gated_oja_backward_kernel";
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    oja_token(in, sq, sm.fw, t, cur[0], next[0], e, y);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    token_backward(*b, sq, sm, adj[0], before[0], after[0], e, t);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(gated_oja, GatedOja)

#include "gen/gated_oja_pair.inc"
