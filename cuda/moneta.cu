/*
 * MONETA kernel pair, ABI v2 (docs/spec/miras-compression.md#moneta, docs/spec/decisions.md#d9; reference src/rules/moneta.ts):
 *   g = φ_p(e) ;  A_{t+1} = α_t A_t − θ_t (G_t + 2λ₂ W_t) ;  W_{t+1} = N_q(A_{t+1}) ;  y_t = read(W_{t+1}, q_t)
 * for both matrices. N_q(A) = A / n^{q−2}, n = (Σ (A²+1e-12)^{q/2})^{1/q} (each matrix its own n);
 * with q = 2 it is the identity and A = W (the accumulator states then equal the W states).
 * A_0 = W_0 at the start of every call (docs/spec/miras-compression.md#moneta-lq): A is derived, not
 * state crossing the ABI. Inside a call the pair keeps (W, A) per step — the checkpoints and the
 * replay carry both — so checkpointing is exact; a sequence cut into several calls restarts A from W
 * at each cut and differs from one call whenever q ≠ 2 (on the q = 2 path A = W and the cut is neutral).
 * Backward: docs/spec/miras-compression.md#moneta-backward and #moneta-backward-lq, with the final
 * state's gradient entering through N_qᵀ(A_T) and ∂L/∂W_0 = α_0 Ā + D at token 0.
 * One block per sequence; the walk's kernels (walk.cuh) through mlp.cuh's MlpWalk.
 */
#include "mlp.cuh"

namespace {

constexpr double kPathTol = 1e-6;
constexpr double kLqEps = 1e-12;
constexpr double kLqTiny = 1e-30;

struct Hp {
  int dh;
  double p, q, l2, sharp;
  __host__ __device__ bool l2path() const { return fabs(q - 2.0) < kPathTol; }
  __host__ __device__ nlk::Bias bias() const {
    if (fabs(p - 2.0) < kPathTol) return {nlk::Bias::kTwice, p, sharp, 0};
    if (fabs(p - 1.0) < kPathTol) return {nlk::Bias::kTanh, p, sharp, 0};
    return {nlk::Bias::kLpGeneral, p, sharp, 0};
  }
};

/** Per-thread partial Σ (A² + 1e-12)^{q/2} over the flat indices this thread owns. */
__device__ inline acc_t lq_partial(const float* A, int n, double q) {
  acc_t s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t x = A[i];
    s += pow(x * x + kLqEps, q / 2.0);
  }
  return s;
}

/** W = N_q(A) for both matrices (A, W: this token's state slices). */
__device__ void lq_normalize(const nlk::MlpSmem& sm, const float* A1, int n1, const float* A2, int n2, double q, float* W1,
                             float* W2) {
  const int tid = threadIdx.x, nt = blockDim.x;
  sm.red[tid] = lq_partial(A1, n1, q);
  sm.red[nt + tid] = lq_partial(A2, n2, q);
  nlk::block_sums(sm.red, 2);
  if (tid == 0) {
    for (int m = 0; m < 2; m++) {
      const acc_t n = pow(sm.red[m * nt], 1.0 / q), s = pow(n, q - 2.0);
      sm.scal[m] = s < kLqTiny ? 1.0 : s;  // the divisor; A itself where it underflows
    }
  }
  __syncthreads();
  for (int i = tid; i < n1; i += nt) W1[i] = static_cast<float>(A1[i] / sm.scal[0]);
  for (int i = tid; i < n2; i += nt) W2[i] = static_cast<float>(A2[i] / sm.scal[1]);
  __syncthreads();
}

/**
 * out += N_qᵀ(A)[Wbar] for both matrices: Wbar/s − c ⟨Wbar, A⟩ A ⊙ (A²+1e-12)^{(q−2)/2},
 * c = (q−2)/(n² s²); out += Wbar where s underflows.
 */
__device__ void lq_vjp_add(const nlk::MlpSmem& sm, const float* A1, int n1, const float* A2, int n2, double q,
                           const adj_t* Wb1, const adj_t* Wb2, adj_t* out1, adj_t* out2) {
  const int tid = threadIdx.x, nt = blockDim.x;
  acc_t w1 = 0, w2 = 0;
  for (int i = tid; i < n1; i += nt) w1 += Wb1[i] * A1[i];
  for (int i = tid; i < n2; i += nt) w2 += Wb2[i] * A2[i];
  sm.red[tid] = lq_partial(A1, n1, q);
  sm.red[nt + tid] = lq_partial(A2, n2, q);
  sm.red[2 * nt + tid] = w1;
  sm.red[3 * nt + tid] = w2;
  nlk::block_sums(sm.red, 4);
  if (tid == 0) {
    for (int m = 0; m < 2; m++) {
      const acc_t n = pow(sm.red[m * nt], 1.0 / q), s = pow(n, q - 2.0);
      sm.scal[2 * m] = s;
      sm.scal[2 * m + 1] = (q - 2.0) / (n * n * s * s) * sm.red[(2 + m) * nt];
    }
  }
  __syncthreads();
  const double e = (q - 2.0) / 2.0;
  for (int m = 0; m < 2; m++) {
    const float* A = m == 0 ? A1 : A2;
    const adj_t* Wb = m == 0 ? Wb1 : Wb2;
    adj_t* out = m == 0 ? out1 : out2;
    const int n = m == 0 ? n1 : n2;
    const acc_t s = sm.scal[2 * m], wa = sm.scal[2 * m + 1];
    for (int i = tid; i < n; i += nt) {
      if (s < kLqTiny) {
        out[i] += Wb[i];
      } else {
        const acc_t x = A[i];
        out[i] += Wb[i] / s - wa * x * pow(x * x + kLqEps, e);
      }
    }
  }
  __syncthreads();
}

/**
 * One token: A_{t+1} = α A_t − θ (G_t + 2λ₂ W_t), W_{t+1} = N_q(A_{t+1}), then y = read(W_{t+1}) when y
 * is given. cur/next hold W1, W2, A1, A2. The forward and the backward's replay both call it (one
 * body), so replayed states are bitwise the forward's. Token staged in sm; ends with a barrier.
 */
NLK_NOINLINE __device__ void moneta_step(const Hp& hp, const nlk::MlpSmem& sm, int d, nlk::StepIn cur, nlk::StepOut next,
                                         float alpha, float theta, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x, dh = hp.dh, n = dh * d;
  const acc_t al = alpha, th = theta;
  const float *W1 = cur.w[0], *W2 = cur.w[1], *A1 = cur.w[2], *A2 = cur.w[3];
  float *N1 = next.w[0], *N2 = next.w[1], *B1 = next.w[2], *B2 = next.w[3];
  nlk::inner_gradient(sm, d, dh, W1, W2, hp.bias());
  for (int idx = tid; idx < n; idx += nt) {
    const acc_t upd = static_cast<acc_t>(sm.u[idx / d]) * sm.k[idx % d] + 2.0 * hp.l2 * W1[idx];
    B1[idx] = static_cast<float>(al * A1[idx] - th * upd);
  }
  for (int idx = tid; idx < n; idx += nt) {
    const acc_t upd = static_cast<acc_t>(sm.g[idx / dh]) * sm.h[idx % dh] + 2.0 * hp.l2 * W2[idx];
    B2[idx] = static_cast<float>(al * A2[idx] - th * upd);
  }
  __syncthreads();
  if (hp.l2path()) {
    for (int idx = tid; idx < n; idx += nt) N1[idx] = B1[idx];
    for (int idx = tid; idx < n; idx += nt) N2[idx] = B2[idx];
    __syncthreads();
  } else {
    lq_normalize(sm, B1, n, B2, n, hp.q, N1, N2);
  }
  if (y != nullptr) nlk::mlp_read(sm, d, dh, N1, N2, y);
}

__host__ __device__ Hp hp_of(const nlk::moneta::Hyper& h) { return Hp{h.d_hidden, h.p, h.q, h.lambda_2, h.sign_sharpness}; }

/** The rule as mlp.cuh's kernels see it. The step state: W1, W2, A1, A2; the adjoints Ā, R, D (two each). */
struct Moneta : nlk::WalkRule<nlk::moneta::ForwardArgs, nlk::moneta::BackwardArgs> {
  static constexpr int kState = 4, kAdj = 6;
  using Ws = nlk::MlpWs<kState, kAdj>;
  static constexpr const char *kForwardName = "moneta_forward_kernel", *kBackwardName = "moneta_backward_kernel";

  Hp hp;
  nlk::Shape s;
  nlk::moneta::Inputs in;
  nlk::MlpSmem sm;
  const float *DY, *F1, *F2;  // F: this sequence's d(final W), NULL = zero
  nlk::moneta::Grads g;
  // Ā = ∂L/∂A_{t+1} (Ab); on the L_q path also R (the read's ∂L/∂W_{t+1}) and D (∂L/∂W_t)
  adj_t *Ab1, *Ab2, *R1, *R2, *D1, *D2;

  template <class A>
  __device__ Moneta(const A& a, const nlk::Seq&)
      : hp(hp_of(a.hyper)), s(a.shape), in(a.in), sm(nlk::carve_shared<nlk::MlpSmem>(a.shape.d, a.hyper.d_hidden, static_cast<int>(blockDim.x))) {}
  /** The call's first step state: W_0 (given) and A_0 = W_0. */
  __device__ void start(const float** init) const {
    init[2] = init[0];
    init[3] = init[1];
  }
  /** The L2 path carries d(final W) in Ā from the start; the L_q path adds it to R at the last token. */
  __device__ void begin_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) {
    DY = a.dy;
    g = a.grad;
    F1 = a.dstate.W1 == nullptr ? nullptr : a.dstate.W1 + sq.state(ws.n);
    F2 = a.dstate.W2 == nullptr ? nullptr : a.dstate.W2 + sq.state(ws.n);
    ws.bind_adjoints(sq.n, &Ab1, &Ab2, &R1, &R2, &D1, &D2);
    const bool l2 = hp.l2path();
    nlk::adjoint_from(Ab1, l2 ? a.dstate.W1 : nullptr, sq, ws.n);
    nlk::adjoint_from(Ab2, l2 ? a.dstate.W2 : nullptr, sq, ws.n);
  }
  __device__ void end_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) const {
    nlk::adjoint_out(a.dstate0.W1, Ab1, nullptr, sq, ws.n);
    nlk::adjoint_out(a.dstate0.W2, Ab2, nullptr, sq, ws.n);
  }
  __device__ void load(const nlk::Seq& sq, int t) const { nlk::load_kvq(sm, sq, t, in.k, in.v, in.q); }
  __device__ void step(const nlk::Seq& sq, int t, nlk::StepIn cur, nlk::StepOut next, float* y) const {
    moneta_step(hp, sm, s.d, cur, next, in.alpha[sq.gate(t)], in.theta[sq.gate(t)], y);
  }
  /** Token t's backward (v1's arithmetic) at step states Wt (t) and Wn (t + 1): W1, W2, A1, A2 each. */
  __device__ void token_backward(const nlk::Seq& sq, int t, nlk::StepIn Wt, nlk::StepIn Wn) {
    const int d = s.d, dh = hp.dh, n = dh * d, tid = threadIdx.x, nt = blockDim.x;
    const nlk::Bias bias = hp.bias();
    const bool l2path = hp.l2path(), last = t == static_cast<int>(sq.T) - 1;
    const float *W1 = Wt.w[0], *W2 = Wt.w[1], *A1 = Wt.w[2], *A2 = Wt.w[3];
    load(sq, t);
    nlk::load_dy(sm, sq, t, DY);
    __syncthreads();
    const acc_t al = in.alpha[sq.gate(t)], th = in.theta[sq.gate(t)];
    const size_t o = sq.vec(t);
    // (read) Ā = N_qᵀ(A_{t+1})[R] + Â ; the final W's gradient joins R at the last token
    if (l2path) {
      nlk::read_vjp(sm, d, dh, Wn.w[0], Wn.w[1], Ab1, Ab2, true, g.dq + o);
    } else {
      nlk::read_vjp(sm, d, dh, Wn.w[0], Wn.w[1], R1, R2, false, g.dq + o);
      if (last) {
        for (int i = tid; i < n; i += nt) R1[i] += F1 == nullptr ? 0.0 : static_cast<adj_t>(F1[i]);
        for (int i = tid; i < n; i += nt) R2[i] += F2 == nullptr ? 0.0 : static_cast<adj_t>(F2[i]);
        __syncthreads();
      }
      lq_vjp_add(sm, Wn.w[2], n, Wn.w[3], n, hp.q, R1, R2, Ab1, Ab2);
    }
    nlk::inner_gradient(sm, d, dh, W1, W2, bias);
    nlk::chain_in(sm, d, dh, Ab1, Ab2);
    // (gates) dα = ⟨Ā, A_t⟩ ; dθ = −(⟨Ā, G_t⟩ + 2λ₂⟨Ā, W_t⟩)
    acc_t pa = 0, pw = 0;
    for (int i = tid; i < n; i += nt) {
      pa += Ab1[i] * A1[i];
      pw += Ab1[i] * W1[i];
    }
    for (int i = tid; i < n; i += nt) {
      pa += Ab2[i] * A2[i];
      pw += Ab2[i] * W2[i];
    }
    sm.red[tid] = pa;
    sm.red[nt + tid] = pw;
    nlk::block_sums(sm.red, 2);
    if (tid == 0) {
      g.dalpha[sq.gate(t)] = static_cast<float>(sm.red[0]);
      g.dtheta[sq.gate(t)] = static_cast<float>(-(nlk::inner_grad_dot(sm, d, dh) + 2.0 * hp.l2 * sm.red[nt]));
    }
    if (l2path) {
      // D = (α − 2λ₂θ) Ŵ + chain, and it is the next Ŵ
      const adj_t keep = al - 2.0 * hp.l2 * th;
      for (int i = tid; i < n; i += nt) Ab1[i] *= keep;
      for (int i = tid; i < n; i += nt) Ab2[i] *= keep;
      __syncthreads();
      nlk::chain_out(sm, d, dh, -th, W1, W2, Ab1, Ab2, bias, g.dk + o, g.dv + o);
    } else {
      // D = −2λ₂θ Ā + chain ;  Â ← α Ā + N_qᵀ(A_t)[D], or at t = 0 (A_0 = W_0, not N_q(A_0)) α Ā + D
      const adj_t c = -2.0 * hp.l2 * th;
      for (int i = tid; i < n; i += nt) D1[i] = c * Ab1[i];
      for (int i = tid; i < n; i += nt) D2[i] = c * Ab2[i];
      __syncthreads();
      nlk::chain_out(sm, d, dh, -th, W1, W2, D1, D2, bias, g.dk + o, g.dv + o);
      for (int i = tid; i < n; i += nt) Ab1[i] *= al;
      for (int i = tid; i < n; i += nt) Ab2[i] *= al;
      __syncthreads();
      if (t > 0) {
        lq_vjp_add(sm, A1, n, A2, n, hp.q, D1, D2, Ab1, Ab2);
      } else {
        for (int i = tid; i < n; i += nt) Ab1[i] += D1[i];
        for (int i = tid; i < n; i += nt) Ab2[i] += D2[i];
        __syncthreads();
      }
    }
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(moneta, nlk::MlpWalk<Moneta>)

#include "gen/moneta_pair.inc"
