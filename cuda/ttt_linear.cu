/*
 * TTT-Linear kernel pair, ABI v2 (docs/spec/ttt.md#ttt-linear, docs/spec/ttt.md#ttt-backward;
 * reference src/rules/ttt_linear.ts, src/rules/ln-recon.ts), the per-token rule (mini-batch 1):
 *   z_t = M_t k_t + m_t ;  u_t = ∂ℓ/∂z, ℓ = ½‖γ ⊙ N(z) + β − (v_t − k_t)‖²
 *   M_{t+1} = M_t − θ_t u_t k_tᵀ ;  m_{t+1} = m_t − θ_t u_t
 *   o_t = M_{t+1} q_t + m_{t+1} ;  y_t = o_t + γ ⊙ N(o_t) + β
 * State M [d,d], M_b = m [d], ln_w = γ, ln_b = β [d] (carried unchanged). One block per sequence;
 * threads own rows of M (and of the adjoint D = ∂L/∂M_{t+1}); products with Mᵀ are column loops
 * after a barrier; the LayerNorm work is thread 0's (ln_recon.cuh). The backward recomputes a
 * token's LayerNorm quantities from the replayed states, so the walk keeps no per-token record.
 */
#include "ln_recon.cuh"

namespace {

using nlk::ln::TokSmem;

/** z = M k + m (rows of sm.z), then u; barriers after each phase. */
__device__ void inner(const float* M, const float* m, const TokSmem& sm, int d, acc_t eps) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t z = 0;
    for (int j = 0; j < d; j++) z += static_cast<acc_t>(M[i * d + j]) * sm.k[j];
    sm.z[i] = z + m[i];
  }
  __syncthreads();
  nlk::ln::inner_grad(sm, d, eps);
  __syncthreads();
}

/** o = M q + m (rows of sm.o), then the output LayerNorm (y when given); barriers after each phase. */
__device__ void outer(const float* M, const float* m, const TokSmem& sm, int d, acc_t eps, float* y) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    acc_t o = 0;
    for (int j = 0; j < d; j++) o += static_cast<acc_t>(M[i * d + j]) * sm.q[j];
    sm.o[i] = o + m[i];
  }
  __syncthreads();
  nlk::ln::out_ln(sm, d, eps, y);
  __syncthreads();
}

struct Ttt : nlk::WalkRule<nlk::ttt_linear::ForwardArgs, nlk::ttt_linear::BackwardArgs> {
  using Ws = nlk::ln::Ws<4>;
  static constexpr const char *kForwardName = "ttt_linear_forward_kernel", *kBackwardName = "ttt_linear_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper&) {
    const size_t d = static_cast<size_t>(s.d), size[4] = {d * d, d, d, d};
    return Ws(c, s, C, size);
  }
  static int threads(const nlk::Shape& s, const Hyper&) { return nlk::threads_for(s.d); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper&, int nt) { return nlk::layout_bytes<TokSmem>(s.d, nt); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper&, int nt) { return nlk::layout_bytes<TokSmem>(s.d, nt); }

  nlk::ttt_linear::Inputs in;
  nlk::Seq sq;
  const Ws& ws;
  acc_t eps;
  TokSmem sm;
  const nlk::ttt_linear::BackwardArgs* b = nullptr;
  adj_t *DM = nullptr, *Dm = nullptr, *DW = nullptr, *DB = nullptr;

  __device__ Ttt(const ForwardArgs& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), eps(a.hyper.eps), sm(nlk::carve_shared<TokSmem>(a.shape.d, static_cast<int>(blockDim.x))) {}
  __device__ Ttt(const BackwardArgs& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), eps(a.hyper.eps), sm(nlk::carve_shared<TokSmem>(a.shape.d, static_cast<int>(blockDim.x))), b(&a) {}

  /** Token t: (M, m, γ, β) → next; y when given. */
  __device__ void step(int t, const float* const* cur, float* const* next, float*, float* y) const {
    const int d = static_cast<int>(sq.d);
    sm.load(sq, t, in.k, in.v, in.q, cur[2], cur[3]);
    __syncthreads();
    inner(cur[0], cur[1], sm, d, eps);
    const acc_t th = in.theta[sq.gate(t)];
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      const acc_t c = th * sm.u[i];
      for (int j = 0; j < d; j++) next[0][i * d + j] = static_cast<float>(cur[0][i * d + j] - c * sm.k[j]);
      next[1][i] = static_cast<float>(cur[1][i] - c);
      next[2][i] = cur[2][i];
      next[3][i] = cur[3][i];
    }
    __syncthreads();
    outer(next[0], next[1], sm, d, eps, y);
  }

  __device__ void begin_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) {
    ws.bind_adjoints(sq.n, &DM, &Dm, &DW, &DB);
    adj_t* adj[4] = {DM, Dm, DW, DB};
    for (int w = 0; w < 4; w++) nlk::adjoint_from(adj[w], a.dstate[w], sq, ws.size[w]);
  }
  __device__ void end_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) const {
    const adj_t* adj[4] = {DM, Dm, DW, DB};
    for (int w = 0; w < 4; w++) nlk::adjoint_out(a.dstate0[w], adj[w], nullptr, sq, ws.size[w]);
  }

  /** Token t's backward (docs/spec/ttt.md#ttt-backward): before = (M_t, m_t, γ, β), after = (M_{t+1}, m_{t+1}, …). */
  __device__ void token(int t, const float* const* before, const float* const* after, float*) const {
    const int d = static_cast<int>(sq.d), tid = threadIdx.x, nt = blockDim.x;
    const size_t o = sq.vec(t);
    const auto& g = b->grad;
    sm.load(sq, t, in.k, in.v, in.q, before[2], before[3]);
    nlk::load_vec_or_zero(sm.dy, b->dy == nullptr ? nullptr : b->dy + o, d);
    __syncthreads();
    inner(before[0], before[1], sm, d, eps);
    outer(after[0], after[1], sm, d, eps, nullptr);
    nlk::ln::out_ln_vjp(sm, d, DW, DB);
    __syncthreads();
    // ∂L/∂M_{t+1} = D + dO qᵀ, ∂L/∂m_{t+1} = Dm + dO; du = −θ (that M k + that m); dθ = −Σ_i u_i (M k + m)_i
    const acc_t th = in.theta[sq.gate(t)];
    acc_t pth = 0;
    for (int i = tid; i < d; i += nt) {
      acc_t dk = 0;
      for (int j = 0; j < d; j++) {
        const adj_t dij = DM[i * d + j] + sm.dO[i] * sm.q[j];
        DM[i * d + j] = dij;
        dk += dij * sm.k[j];
      }
      Dm[i] += sm.dO[i];
      const acc_t s = dk + Dm[i];
      pth += static_cast<acc_t>(sm.u[i]) * s;
      sm.du[i] = -th * s;
    }
    sm.red[tid] = pth;
    __syncthreads();
    if (tid == 0) g.dtheta[sq.gate(t)] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
    nlk::ln::recon_vjp(sm, d, DW, DB, g.dv + o);
    __syncthreads();
    // columns: dq = M_{t+1}ᵀ dO ; dk = −θ Dᵀ u + δr + M_tᵀ dz
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, gu = 0, gz = 0;
      for (int i = 0; i < d; i++) {
        gq += after[0][i * d + j] * sm.dO[i];
        gu += DM[i * d + j] * sm.u[i];
        gz += before[0][i * d + j] * sm.dz[i];
      }
      g.dq[o + j] = static_cast<float>(gq);
      g.dk[o + j] = static_cast<float>(-th * gu + sm.dr[j] + gz);
    }
    __syncthreads();  // every column loop has read D before it becomes ∂L/∂M_t
    for (int i = tid; i < d; i += nt) {
      for (int j = 0; j < d; j++) DM[i * d + j] += sm.dz[i] * sm.k[j];
      Dm[i] += sm.dz[i];
    }
    __syncthreads();
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(ttt_linear, Ttt)

#include "gen/ttt_linear_pair.inc"
