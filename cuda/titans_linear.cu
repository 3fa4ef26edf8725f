/*
 * Titans-linear kernel pair, ABI v2 (docs/spec/ttt.md#titans-linear; reference
 * src/rules/titans_linear.ts, src/rules/ln-recon.ts): Titans' momentum and decay on the LayerNorm
 * reconstruction objective, per token:
 *   z_t = M_t k_t ;  u_t = Nᵀ(z_t; γ ⊙ r_t)  (∇_M ℓ = 2 u_t k_tᵀ, ℓ = ‖γ ⊙ N(M k) + β − (v − k)‖²)
 *   S_{t+1} = η_t S_t − 2θ_t u_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   o_t = M_{t+1} q_t ;  y_t = o_t + γ ⊙ N(o_t) + β
 * State M, S [d,d], ln_w = γ, ln_b = β [d] (carried unchanged). Laid out as titans.cu: one block
 * per sequence, threads own rows of M, S and of the adjoints D = ∂L/∂M_{t+1}, E = ∂L/∂S_{t+1};
 * the LayerNorm work is thread 0's (ln_recon.cuh); the backward recomputes a token's LayerNorm
 * quantities from the replayed states.
 */
#include "ln_recon.cuh"

namespace {

using nlk::ln::TokSmem;

struct TitansLinear : nlk::WalkRule<nlk::titans_linear::ForwardArgs, nlk::titans_linear::BackwardArgs> {
  using Ws = nlk::ln::Ws<4>;
  static constexpr const char *kForwardName = "titans_linear_forward_kernel", *kBackwardName = "titans_linear_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper&) {
    const size_t d = static_cast<size_t>(s.d), size[4] = {d * d, d * d, d, d};
    return Ws(c, s, C, size);
  }
  static int threads(const nlk::Shape& s, const Hyper&) { return nlk::threads_for(s.d); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper&, int nt) { return nlk::layout_bytes<TokSmem>(s.d, nt); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper&, int nt) { return nlk::layout_bytes<TokSmem>(s.d, nt); }

  nlk::titans_linear::Inputs in;
  nlk::Seq sq;
  const Ws& ws;
  acc_t eps;
  TokSmem sm;
  const nlk::titans_linear::BackwardArgs* b = nullptr;
  adj_t *D = nullptr, *E = nullptr, *DW = nullptr, *DB = nullptr;

  __device__ TitansLinear(const ForwardArgs& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), eps(a.hyper.eps), sm(nlk::carve_shared<TokSmem>(a.shape.d, static_cast<int>(blockDim.x))) {}
  __device__ TitansLinear(const BackwardArgs& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), eps(a.hyper.eps), sm(nlk::carve_shared<TokSmem>(a.shape.d, static_cast<int>(blockDim.x))), b(&a) {}

  /** z = M k (rows), then u; barriers after each phase. */
  __device__ void inner(const float* M, int d) const {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      acc_t z = 0;
      for (int j = 0; j < d; j++) z += static_cast<acc_t>(M[i * d + j]) * sm.k[j];
      sm.z[i] = z;
    }
    __syncthreads();
    nlk::ln::inner_grad(sm, d, eps);
    __syncthreads();
  }

  /** o = M q (rows), then the output LayerNorm (y when given); barriers after each phase. */
  __device__ void outer(const float* M, int d, float* y) const {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      acc_t o = 0;
      for (int j = 0; j < d; j++) o += static_cast<acc_t>(M[i * d + j]) * sm.q[j];
      sm.o[i] = o;
    }
    __syncthreads();
    nlk::ln::out_ln(sm, d, eps, y);
    __syncthreads();
  }

  /** Token t: (M, S, γ, β) → next; y when given. */
  __device__ void step(int t, const float* const* cur, float* const* next, float*, float* y) const {
    const int d = static_cast<int>(sq.d);
    sm.load(sq, t, in.k, in.v, in.q, cur[2], cur[3]);
    __syncthreads();
    inner(cur[0], d);
    const size_t gi = sq.gate(t);
    const acc_t keep = 1.0 - static_cast<acc_t>(in.alpha[gi]), th = in.theta[gi], et = in.eta[gi];
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      const acc_t c = -2 * th * sm.u[i];
      for (int j = 0; j < d; j++) {
        // as the reference: M_{t+1} adds the stored (rounded) S_{t+1}
        const float sn = static_cast<float>(et * cur[1][i * d + j] + c * sm.k[j]);
        next[1][i * d + j] = sn;
        next[0][i * d + j] = static_cast<float>(keep * cur[0][i * d + j] + sn);
      }
      next[2][i] = cur[2][i];
      next[3][i] = cur[3][i];
    }
    __syncthreads();
    outer(next[0], d, y);
  }

  __device__ void begin_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) {
    ws.bind_adjoints(sq.n, &D, &E, &DW, &DB);
    adj_t* adj[4] = {D, E, DW, DB};
    for (int w = 0; w < 4; w++) nlk::adjoint_from(adj[w], a.dstate[w], sq, ws.size[w]);
  }
  __device__ void end_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) const {
    const adj_t* adj[4] = {D, E, DW, DB};
    for (int w = 0; w < 4; w++) nlk::adjoint_out(a.dstate0[w], adj[w], nullptr, sq, ws.size[w]);
  }

  /** Token t's backward: before = (M_t, S_t, γ, β), after = (M_{t+1}, S_{t+1}, …); D, E carried to token t. */
  __device__ void token(int t, const float* const* before, const float* const* after, float*) const {
    const int d = static_cast<int>(sq.d), tid = threadIdx.x, nt = blockDim.x;
    const size_t o = sq.vec(t), gi = sq.gate(t);
    const auto& g = b->grad;
    sm.load(sq, t, in.k, in.v, in.q, before[2], before[3]);
    nlk::load_vec_or_zero(sm.dy, b->dy == nullptr ? nullptr : b->dy + o, d);
    __syncthreads();
    inner(before[0], d);
    outer(after[0], d, nullptr);
    nlk::ln::out_ln_vjp(sm, d, DW, DB);
    __syncthreads();
    const acc_t al = in.alpha[gi], th = in.theta[gi], et = in.eta[gi];
    const float *Mt = before[0], *St = before[1];
    // rows: D += dO qᵀ (the read); E += D (S_{t+1} enters M_{t+1}); Ek = E k; du = −2θ Ek
    acc_t pa = 0, pe = 0, pth = 0;
    for (int i = tid; i < d; i += nt) {
      acc_t ek = 0;
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        const adj_t dij = D[ij] + sm.dO[i] * sm.q[j];
        D[ij] = dij;
        const adj_t eij = E[ij] + dij;
        E[ij] = eij;
        pa += dij * Mt[ij];
        pe += static_cast<acc_t>(St[ij]) * eij;
        ek += eij * sm.k[j];
      }
      pth += static_cast<acc_t>(sm.u[i]) * ek;
      sm.du[i] = -2 * th * ek;
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pe;
    sm.red[2 * nt + tid] = pth;
    __syncthreads();
    if (tid == 0) {
      g.dalpha[gi] = static_cast<float>(-nlk::ordered_sum(sm.red, 0));
      g.deta[gi] = static_cast<float>(nlk::ordered_sum(sm.red, 1));
      g.dtheta[gi] = static_cast<float>(-2 * nlk::ordered_sum(sm.red, 2));
    }
    nlk::ln::recon_vjp(sm, d, DW, DB, g.dv + o);
    __syncthreads();
    // columns: dq = M_{t+1}ᵀ dO ; dk = −2θ Eᵀ u + δr + M_tᵀ dz
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0, gu = 0, gz = 0;
      for (int i = 0; i < d; i++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        gq += after[0][ij] * sm.dO[i];
        gu += E[ij] * sm.u[i];
        gz += Mt[ij] * sm.dz[i];
      }
      g.dq[o + j] = static_cast<float>(gq);
      g.dk[o + j] = static_cast<float>(-2 * th * gu + sm.dr[j] + gz);
    }
    __syncthreads();  // every column loop has read D, E before they become ∂L/∂M_t, ∂L/∂S_t
    const adj_t keep = 1.0 - al;
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        D[ij] = keep * D[ij] + sm.dz[i] * sm.k[j];
        E[ij] *= et;
      }
    __syncthreads();
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(titans_linear, TitansLinear)

#include "gen/titans_linear_pair.inc"
