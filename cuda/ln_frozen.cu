/*
 * Frozen read of TTT-Linear and Titans-linear, ABI v2 (docs/spec/ttt.md#ttt-frozen; reference
 * src/rules/ln-recon.ts lnOutFrozenRead): o_t = M q_t (+ m with TTT-Linear's bias M_b),
 * y_t = o_t + γ ⊙ N(o_t) + β, and its VJP dq_t = Mᵀ δo_t, dM = Σ_t δo_t q_tᵀ, dm = Σ_t δo_t,
 * dγ = Σ_t dy_t ⊙ N(o_t), dβ = Σ_t dy_t (δo = dy + Nᵀ(o; γ ⊙ dy)); Titans-linear's S gets a zero
 * gradient. One block per sequence, tokens in order: rows of M for o and dM, columns for dq, the
 * LayerNorm on thread 0 (ln_recon.cuh). The workspace holds the f64 sums of dM, dm, dγ, dβ.
 */
#include "ln_recon.cuh"

namespace {

using nlk::ln::TokSmem;

/** The state of one call: M, the bias m (null without), γ, β; the backward's outputs (null in the forward). */
struct Frozen {
  const float *M, *m, *W, *B;
  const float* dy;
  float *dq, *dM, *dm, *dW, *dB, *dS;
};

/** f64 sums per sequence: dM [d,d], dm, dγ, dβ [d]. */
__host__ __device__ inline size_t sums_per_seq(int d) { return static_cast<size_t>(d) * d + 3 * static_cast<size_t>(d); }

__global__ void ln_frozen_kernel(nlk::Shape s, acc_t eps, const float* Q, Frozen f, float* Y, unsigned char* ws, bool backward) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d, tid = threadIdx.x, nt = blockDim.x;
  const size_t dd = sq.d * sq.d;
  TokSmem sm = nlk::carve_shared<TokSmem>(d, nt);
  sm.saved_f32 = false;  // the reference's frozen read keeps N(o) and σ in f64
  const float* M = f.M + sq.state(dd);
  const float* m = f.m == nullptr ? nullptr : f.m + sq.state(sq.d);
  nlk::load_vec(sm.W, f.W + sq.state(sq.d), d);
  nlk::load_vec(sm.B, f.B + sq.state(sq.d), d);
  adj_t *AM = nullptr, *Am = nullptr, *AW = nullptr, *AB = nullptr;
  if (backward) {
    AM = reinterpret_cast<adj_t*>(ws) + sq.n * sums_per_seq(d);
    Am = AM + dd;
    AW = Am + d;
    AB = AW + d;
    for (size_t i = tid; i < sums_per_seq(d); i += nt) AM[i] = 0;
  }
  for (int t = 0; t < s.T; t++) {
    const size_t o = sq.vec(t);
    nlk::load_vec(sm.q, Q + o, d);
    if (backward) nlk::load_vec_or_zero(sm.dy, f.dy == nullptr ? nullptr : f.dy + o, d);
    __syncthreads();
    for (int i = tid; i < d; i += nt) {
      acc_t r = 0;
      for (int j = 0; j < d; j++) r += static_cast<acc_t>(M[i * d + j]) * sm.q[j];
      sm.o[i] = m == nullptr ? r : r + m[i];
    }
    __syncthreads();
    nlk::ln::out_ln(sm, d, eps, backward ? nullptr : Y + o);
    if (backward) nlk::ln::out_ln_vjp(sm, d, AW, AB);
    __syncthreads();
    if (backward) {
      for (int j = tid; j < d; j += nt) {
        acc_t g = 0;
        for (int i = 0; i < d; i++) g += M[i * d + j] * sm.dO[i];
        f.dq[o + j] = static_cast<float>(g);
      }
      for (int i = tid; i < d; i += nt) {
        for (int j = 0; j < d; j++) AM[i * d + j] += sm.dO[i] * sm.q[j];
        Am[i] += sm.dO[i];
      }
    }
    __syncthreads();
  }
  if (!backward) return;
  nlk::adjoint_out(f.dM, AM, nullptr, sq, dd);
  if (f.dm != nullptr) nlk::adjoint_out(f.dm, Am, nullptr, sq, sq.d);
  nlk::adjoint_out(f.dW, AW, nullptr, sq, sq.d);
  nlk::adjoint_out(f.dB, AB, nullptr, sq, sq.d);
  if (f.dS != nullptr)
    for (size_t i = tid; i < dd; i += nt) f.dS[sq.state(dd) + i] = 0.0f;
}

int launch(const nlk::Shape& s, double eps, const float* q, const Frozen& f, float* y, unsigned char* ws, bool backward) {
  const int nt = nlk::threads_for(s.d);
  NLK_LAUNCH_NAMED(ln_frozen_kernel, backward ? "ln_frozen_backward_kernel" : "ln_frozen_forward_kernel", s.seqs(), nt,
                   nlk::layout_bytes<TokSmem>(s.d, nt))(s, eps, q, f, y, ws, backward);
  return nlk::launch_status();
}

int workspace(const nlk::Shape& s, size_t* bytes) {
  *bytes = static_cast<size_t>(s.seqs()) * sums_per_seq(s.d) * sizeof(adj_t);
  return NLK_OK;
}

}  // namespace

// ── launchers (the contract of cuda/gen/nlk_rules.cuh) ─────────────────────────────────────

namespace nlk::ttt_linear {
int frozen_workspace_bytes(const Shape& s, const Hyper&, size_t* bytes) { return workspace(s, bytes); }
int frozen_forward(const FrozenForwardArgs& a) {
  const Frozen f{a.state.M, a.state.M_b, a.state.ln_w, a.state.ln_b, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  return launch(a.shape, a.hyper.eps, a.q, f, a.y, a.ws, false);
}
int frozen_backward(const FrozenBackwardArgs& a) {
  const Frozen f{a.state.M, a.state.M_b, a.state.ln_w, a.state.ln_b, a.dy, a.dq, a.dstate.M, a.dstate.M_b, a.dstate.ln_w, a.dstate.ln_b, nullptr};
  return launch(a.shape, a.hyper.eps, a.q, f, nullptr, a.ws, true);
}
}  // namespace nlk::ttt_linear

namespace nlk::titans_linear {
int frozen_workspace_bytes(const Shape& s, const Hyper&, size_t* bytes) { return workspace(s, bytes); }
int frozen_forward(const FrozenForwardArgs& a) {
  const Frozen f{a.state.M, nullptr, a.state.ln_w, a.state.ln_b, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
  return launch(a.shape, a.hyper.eps, a.q, f, a.y, a.ws, false);
}
int frozen_backward(const FrozenBackwardArgs& a) {
  const Frozen f{a.state.M, nullptr, a.state.ln_w, a.state.ln_b, a.dy, a.dq, a.dstate.M, nullptr, a.dstate.ln_w, a.dstate.ln_b, a.dstate.S};
  return launch(a.shape, a.hyper.eps, a.q, f, nullptr, a.ws, true);
}
}  // namespace nlk::titans_linear

#include "gen/ttt_linear_frozen.inc"
#include "gen/titans_linear_frozen.inc"
