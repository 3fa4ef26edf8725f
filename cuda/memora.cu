/*
 * MEMORA kernel pair, ABI v2 (docs/spec/miras-compression.md#memora; reference src/rules/memora.ts): MLP
 * memory with simplex rows, L2 bias (g = e), KL retention as a row softmax, READ BEFORE WRITE:
 *   y_t = read(W_t, q_t) ;  W_{t+1}[i,:] = softmax(α_t logc(W_t[i,:]) − θ_t G_t[i,:]) ,  logc(w) = ln max(w, 1e-8)
 * One thread per row for the softmax and its VJP; the logits are recomputed in each pass. The state
 * is W alone, so a call split into chunks composes exactly. Its kernels are mlp.cuh's, on the walk (walk.cuh).
 */
#include "mlp.cuh"

namespace {

constexpr double kLogFloor = 1e-8;

__device__ inline double logc(double w) { return log(w > kLogFloor ? w : kLogFloor); }
/** Exact derivative of logc: 1/w above the clamp, 0 where the clamp is active (D2). */
__device__ inline double logc_prime(double w) { return w > kLogFloor ? 1.0 / w : 0.0; }

/** One row: out = softmax(α logc(W[0..n)) − θ x_i y[0..n)), max-subtracted. */
__device__ inline void softmax_row(const float* W, int n, acc_t al, acc_t cx, const float* yv, float* out) {
  double mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    const double z = al * logc(W[j]) - cx * yv[j];
    mx = z > mx ? z : mx;
  }
  double sum = 0;
  for (int j = 0; j < n; j++) sum += exp(al * logc(W[j]) - cx * yv[j] - mx);
  const double div = sum > 0 ? sum : 1.0;
  for (int j = 0; j < n; j++) out[j] = static_cast<float>(exp(al * logc(W[j]) - cx * yv[j] - mx) / div);
}

/**
 * One token: y = read(W_t) when y is given, then W_{t+1} row by row. The forward and the backward's
 * replay both call it (one body). The token is staged in sm (barrier done); ends with a barrier.
 */
NLK_NOINLINE __device__ void memora_step(const nlk::MlpSmem& sm, int d, int dh, const float* W1, const float* W2, float* N1,
                                         float* N2, float alpha, float theta, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x;
  const nlk::Bias bias{nlk::Bias::kIdentity, 0, 0, 0};
  const acc_t al = alpha, th = theta;
  if (y != nullptr) nlk::mlp_read(sm, d, dh, W1, W2, y);
  nlk::inner_gradient(sm, d, dh, W1, W2, bias);
  for (int i = tid; i < dh; i += nt) softmax_row(W1 + i * d, d, al, th * sm.u[i], sm.k, N1 + i * d);
  for (int i = tid; i < d; i += nt) softmax_row(W2 + i * dh, dh, al, th * sm.g[i], sm.h, N2 + i * dh);
  __syncthreads();
}

/** In place, one row per thread: Ŵ ← dZ = P ⊙ (Ŵ − ⟨P, Ŵ⟩) with P = W_{t+1} (the softmax output). */
__device__ inline void softmax_rows_vjp(const float* P, int rows, int cols, adj_t* G) {
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    acc_t dot = 0;
    for (int j = 0; j < cols; j++) dot += static_cast<acc_t>(P[r * cols + j]) * G[r * cols + j];
    for (int j = 0; j < cols; j++) G[r * cols + j] = P[r * cols + j] * (G[r * cols + j] - dot);
  }
}

/** The rule as mlp.cuh's kernels see it. */
struct Memora : nlk::WalkRule<nlk::memora::ForwardArgs, nlk::memora::BackwardArgs> {
  static constexpr int kState = 2, kAdj = 4;
  using Ws = nlk::MlpWs<kState, kAdj>;
  static constexpr const char *kForwardName = "memora_forward_kernel", *kBackwardName = "memora_backward_kernel";

  int dh;
  nlk::Shape s;
  nlk::memora::Inputs in;
  nlk::MlpSmem sm;
  const float* DY;
  nlk::memora::Grads g;
  adj_t *Wh1, *Wh2, *D1, *D2;  // Ŵ = ∂L/∂W_{t+1} (turned into dZ in place) and D = ∂L/∂W_t, swapped per token

  template <class A>
  __device__ Memora(const A& a, const nlk::Seq&)
      : dh(a.hyper.d_hidden), s(a.shape), in(a.in), sm(nlk::carve_shared<nlk::MlpSmem>(a.shape.d, dh, static_cast<int>(blockDim.x))) {}
  __device__ void begin_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) {
    DY = a.dy;
    g = a.grad;
    ws.bind_adjoints(sq.n, &Wh1, &Wh2, &D1, &D2);
    nlk::adjoint_from(Wh1, a.dstate.W1, sq, ws.n);
    nlk::adjoint_from(Wh2, a.dstate.W2, sq, ws.n);
  }
  /** After the last swap Ŵ holds D of token 0: ∂L/∂W_0. */
  __device__ void end_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) const {
    nlk::adjoint_out(a.dstate0.W1, Wh1, nullptr, sq, ws.n);
    nlk::adjoint_out(a.dstate0.W2, Wh2, nullptr, sq, ws.n);
  }
  __device__ void load(const nlk::Seq& sq, int t) const { nlk::load_kvq(sm, sq, t, in.k, in.v, in.q); }
  __device__ void step(const nlk::Seq& sq, int t, nlk::StepIn cur, nlk::StepOut next, float* y) const {
    memora_step(sm, s.d, dh, cur.w[0], cur.w[1], next.w[0], next.w[1], in.alpha[sq.gate(t)], in.theta[sq.gate(t)], y);
  }
  /** Token t's backward (v1's arithmetic) at W_t = Wt, W_{t+1} = Wn. */
  __device__ void token_backward(const nlk::Seq& sq, int t, nlk::StepIn Wt, nlk::StepIn Wn) {
    const int d = s.d, n = dh * d, tid = threadIdx.x, nt = blockDim.x;
    const nlk::Bias bias{nlk::Bias::kIdentity, 0, 0, 0};
    const float *W1 = Wt.w[0], *W2 = Wt.w[1];
    load(sq, t);
    nlk::load_dy(sm, sq, t, DY);
    const acc_t al = in.alpha[sq.gate(t)], th = in.theta[sq.gate(t)];
    const size_t o = sq.vec(t);
    softmax_rows_vjp(Wn.w[0], dh, d, Wh1);
    softmax_rows_vjp(Wn.w[1], d, dh, Wh2);
    __syncthreads();
    // dα = ⟨dZ, logc(W_t)⟩
    acc_t pa = 0;
    for (int i = tid; i < n; i += nt) pa += Wh1[i] * logc(W1[i]);
    for (int i = tid; i < n; i += nt) pa += Wh2[i] * logc(W2[i]);
    sm.red[tid] = pa;
    nlk::inner_gradient(sm, d, dh, W1, W2, bias);
    nlk::chain_in(sm, d, dh, Wh1, Wh2);
    if (tid == 0) {
      g.dalpha[sq.gate(t)] = static_cast<float>(nlk::ordered_sum(sm.red, 0));
      g.dtheta[sq.gate(t)] = static_cast<float>(-nlk::inner_grad_dot(sm, d, dh));  // dθ = −⟨dZ, G_t⟩
    }
    // (direct) D = α dZ ⊙ logc'(W_t); dG = −θ dZ, then the inner-gradient chain
    for (int i = tid; i < n; i += nt) D1[i] = al * Wh1[i] * logc_prime(W1[i]);
    for (int i = tid; i < n; i += nt) D2[i] = al * Wh2[i] * logc_prime(W2[i]);
    __syncthreads();
    nlk::chain_out(sm, d, dh, -th, W1, W2, D1, D2, bias, g.dk + o, g.dv + o);
    // (read before write: at W_t)
    nlk::read_vjp(sm, d, dh, W1, W2, D1, D2, true, g.dq + o);
    nlk::swap(Wh1, D1);
    nlk::swap(Wh2, D2);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(memora, nlk::MlpWalk<Memora>)

#include "gen/memora_pair.inc"
