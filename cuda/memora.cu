/*
 * MEMORA kernel pair, ABI v2 (docs/spec/miras-compression.md#memora; reference src/rules/memora.ts): MLP
 * memory with simplex rows, L2 bias (g = e), KL retention as a row softmax, READ BEFORE WRITE:
 *   y_t = read(W_t, q_t) ;  W_{t+1}[i,:] = softmax(α_t logc(W_t[i,:]) − θ_t G_t[i,:]) ,  logc(w) = ln max(w, 1e-8)
 * One thread per row for the softmax and its VJP; the logits are recomputed in each pass. The state
 * is W alone, so a call split into chunks composes exactly. Checkpointing and replay as in mlp.cuh.
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

/** The rule as mlp.cuh's walks see it. */
struct Memora {
  int dh;
  nlk::Shape s;
  nlk::memora::Inputs in;
  nlk::MlpSmem sm;
  const float* DY;
  nlk::memora::Grads g;
  adj_t *Wh1, *Wh2, *D1, *D2;  // Ŵ = ∂L/∂W_{t+1} (turned into dZ in place) and D = ∂L/∂W_t, swapped per token

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

constexpr int kState = 2, kAdj = 4;

struct FwdArgs {
  int dh;
  nlk::Shape s;
  int C;
  nlk::memora::Inputs in;
  nlk::memora::StateIn st0;
  float* Y;
  nlk::memora::StateOut st;
  unsigned char* ws;
};

__device__ Memora make_rule(int dh, const nlk::Shape& s, const nlk::memora::Inputs& in) {
  Memora r{};
  r.dh = dh;
  r.s = s;
  r.in = in;
  r.sm = nlk::carve_shared<nlk::MlpSmem>(s.d, dh, static_cast<int>(blockDim.x));
  return r;
}

__global__ void memora_forward_kernel(FwdArgs a) {
  const nlk::Seq sq(a.s, blockIdx.x);
  Memora r = make_rule(a.dh, a.s, a.in);
  nlk::Carver c(a.ws);
  const nlk::MlpWs ws(c, a.s, a.C, a.dh, kState, kAdj);
  nlk::mlp_forward_walk(r, sq, ws, nlk::StepIn{{a.st0.W1 + sq.state(ws.n), a.st0.W2 + sq.state(ws.n), nullptr, nullptr}}, a.Y,
                        a.st.W1, a.st.W2);
}

struct BwdArgs {
  int dh;
  nlk::Shape s;
  int C;
  nlk::memora::Inputs in;
  nlk::memora::StateIn st0;
  const float* DY;
  nlk::memora::StateIn dst;
  unsigned char* ws;
  nlk::memora::Grads g;
  nlk::memora::StateOut dst0;
};

__global__ void memora_backward_kernel(BwdArgs a) {
  const nlk::Seq sq(a.s, blockIdx.x);
  Memora r = make_rule(a.dh, a.s, a.in);
  r.DY = a.DY;
  r.g = a.g;
  nlk::Carver c(a.ws);
  const nlk::MlpWs ws(c, a.s, a.C, a.dh, kState, kAdj);
  r.Wh1 = ws.adjoint(sq.n, 0);
  r.Wh2 = ws.adjoint(sq.n, 1);
  r.D1 = ws.adjoint(sq.n, 2);
  r.D2 = ws.adjoint(sq.n, 3);
  nlk::adjoint_from(r.Wh1, a.dst.W1, sq, ws.n);
  nlk::adjoint_from(r.Wh2, a.dst.W2, sq, ws.n);
  __syncthreads();
  nlk::mlp_backward_walk(r, sq, ws, nlk::StepIn{{a.st0.W1 + sq.state(ws.n), a.st0.W2 + sq.state(ws.n), nullptr, nullptr}});
  // after the last swap Ŵ holds D of token 0: ∂L/∂W_0
  nlk::adjoint_out(a.dst0.W1, r.Wh1, nullptr, sq, ws.n);
  nlk::adjoint_out(a.dst0.W2, r.Wh2, nullptr, sq, ws.n);
}

}  // namespace

// ── launchers (the contract of cuda/gen/nlk_rules.cuh) ─────────────────────────────────────

namespace nlk::memora {

int workspace_bytes(const Shape& shape, int C, const Hyper& hyper, size_t* bytes) {
  *bytes = mlp_ws_bytes(shape, C, hyper.d_hidden, kState, kAdj);
  return NLK_OK;
}

int forward(const ForwardArgs& a) {
  const int nt = mlp_threads(a.shape.d, a.hyper.d_hidden);
  NLK_LAUNCH(memora_forward_kernel, a.shape.seqs(), nt, smem_bytes<MlpSmem>(a.shape.d, a.hyper.d_hidden, nt))
  (FwdArgs{a.hyper.d_hidden, a.shape, a.C, a.in, a.state0, a.y, a.state, a.ws});
  return launch_status();
}

int backward(const BackwardArgs& a) {
  const int nt = mlp_threads(a.shape.d, a.hyper.d_hidden);
  NLK_LAUNCH(memora_backward_kernel, a.shape.seqs(), nt, smem_bytes<MlpSmem>(a.shape.d, a.hyper.d_hidden, nt))
  (BwdArgs{a.hyper.d_hidden, a.shape, a.C, a.in, a.state0, a.dy, a.dstate, a.ws, a.grad, a.dstate0});
  return launch_status();
}

}  // namespace nlk::memora

#include "gen/memora_pair.inc"
