/*
 * YAAD kernel pair, ABI v2 (docs/spec/miras-compression.md#yaad; reference src/rules/yaad.ts): Huber
 * bias ψ(e) = e if |e| < δ else δ·sign(e), decoupled L2 retention toward the boundary snapshot B = W_0:
 *   W_{t+1} = α_t W_t − θ_t (G_t + 2λ_loc (W_t − B) + 2λ₂ W_t) ;  y_t = read(W_{t+1}, q_t)
 * B is the state at the start of the call (docs/spec/miras-compression.md#yaad-state): inside a call it
 * is the initial-state input, so checkpointing leaves it alone, while cutting a sequence into several
 * calls takes a new snapshot per call and changes the result whenever λ_loc > 0. The backward returns
 * ∂L/∂W_0 = D + dB with dB = Σ_t 2λ_loc θ_t Ŵ_{t+1} (docs/spec/miras-compression.md#yaad-backward).
 * One block per sequence; the walk's kernels (walk.cuh) through mlp.cuh's MlpWalk.
 */
#include "mlp.cuh"

namespace {

struct Hp {
  int dh;
  double delta, lloc, l2;
  __host__ __device__ nlk::Bias bias() const { return {nlk::Bias::kHuber, 0, 0, delta}; }
};

/**
 * One token: W_{t+1} from W_t (cur) and B (the call's W_0), then y = read(W_{t+1}) when y is given.
 * The forward and the backward's replay both call it (one body), so replayed states are bitwise the
 * forward's. The token is staged in sm (barrier done); ends with a barrier.
 */
NLK_NOINLINE __device__ void yaad_step(const Hp& hp, const nlk::MlpSmem& sm, int d, const float* W1, const float* W2,
                                       const float* B1, const float* B2, float* N1, float* N2, float alpha, float theta,
                                       float* y) {
  const int tid = threadIdx.x, nt = blockDim.x, dh = hp.dh, n = dh * d;
  const acc_t al = alpha, th = theta;
  nlk::inner_gradient(sm, d, dh, W1, W2, hp.bias());
  for (int idx = tid; idx < n; idx += nt) {
    const acc_t w = W1[idx];
    const acc_t upd = static_cast<acc_t>(sm.u[idx / d]) * sm.k[idx % d] + 2.0 * hp.lloc * (w - B1[idx]) + 2.0 * hp.l2 * w;
    N1[idx] = static_cast<float>(al * w - th * upd);
  }
  for (int idx = tid; idx < n; idx += nt) {
    const acc_t w = W2[idx];
    const acc_t upd = static_cast<acc_t>(sm.g[idx / dh]) * sm.h[idx % dh] + 2.0 * hp.lloc * (w - B2[idx]) + 2.0 * hp.l2 * w;
    N2[idx] = static_cast<float>(al * w - th * upd);
  }
  __syncthreads();
  if (y != nullptr) nlk::mlp_read(sm, d, dh, N1, N2, y);
}

__host__ __device__ Hp hp_of(const nlk::yaad::Hyper& h) { return Hp{h.d_hidden, h.delta, h.lambda_local, h.lambda_2}; }

/** The rule as mlp.cuh's kernels see it: staging, the step, and one token's backward. */
struct Yaad : nlk::WalkRule<nlk::yaad::ForwardArgs, nlk::yaad::BackwardArgs> {
  static constexpr int kState = 2, kAdj = 4;
  using Ws = nlk::MlpWs<kState, kAdj>;
  static constexpr const char *kForwardName = "yaad_forward_kernel", *kBackwardName = "yaad_backward_kernel";

  Hp hp;
  nlk::Shape s;
  nlk::yaad::Inputs in;
  const float *B1, *B2;  // this sequence's W_0: the boundary snapshot
  nlk::MlpSmem sm;
  // backward only
  const float* DY;
  nlk::yaad::Grads g;
  adj_t *Wh1, *Wh2, *Bb1, *Bb2;  // Ŵ = ∂L/∂W_{t+1}; dB accumulated over the tokens

  template <class A>
  __device__ Yaad(const A& a, const nlk::Seq& sq)
      : hp(hp_of(a.hyper)), s(a.shape), in(a.in), B1(a.state0.W1 + sq.state(sq.d * a.hyper.d_hidden)),
        B2(a.state0.W2 + sq.state(sq.d * a.hyper.d_hidden)),
        sm(nlk::carve_shared<nlk::MlpSmem>(a.shape.d, a.hyper.d_hidden, static_cast<int>(blockDim.x))) {}
  __device__ void begin_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) {
    DY = a.dy;
    g = a.grad;
    ws.bind_adjoints(sq.n, &Wh1, &Wh2, &Bb1, &Bb2);
    nlk::adjoint_from(Wh1, a.dstate.W1, sq, ws.n);
    nlk::adjoint_from(Wh2, a.dstate.W2, sq, ws.n);
    nlk::adjoint_from(Bb1, nullptr, sq, ws.n);
    nlk::adjoint_from(Bb2, nullptr, sq, ws.n);
  }
  /** ∂L/∂W_0 = D (through the state at t = 0) + dB (through the snapshot). */
  __device__ void end_backward(const Ws& ws, const nlk::Seq& sq, const BackwardArgs& a) const {
    nlk::adjoint_out(a.dstate0.W1, Wh1, Bb1, sq, ws.n);
    nlk::adjoint_out(a.dstate0.W2, Wh2, Bb2, sq, ws.n);
  }
  __device__ void load(const nlk::Seq& sq, int t) const { nlk::load_kvq(sm, sq, t, in.k, in.v, in.q); }
  __device__ void step(const nlk::Seq& sq, int t, nlk::StepIn cur, nlk::StepOut next, float* y) const {
    yaad_step(hp, sm, s.d, cur.w[0], cur.w[1], B1, B2, next.w[0], next.w[1], in.alpha[sq.gate(t)], in.theta[sq.gate(t)], y);
  }
  /** Token t's backward (v1's arithmetic) at W_t = Wt, W_{t+1} = Wn; Ŵ becomes ∂L/∂W_t. */
  __device__ void token_backward(const nlk::Seq& sq, int t, nlk::StepIn Wt, nlk::StepIn Wn) {
    const int d = s.d, dh = hp.dh, n = dh * d, tid = threadIdx.x, nt = blockDim.x;
    const nlk::Bias bias = hp.bias();
    load(sq, t);
    nlk::load_dy(sm, sq, t, DY);
    __syncthreads();
    const acc_t al = in.alpha[sq.gate(t)], th = in.theta[sq.gate(t)];
    const size_t o = sq.vec(t);
    nlk::read_vjp(sm, d, dh, Wn.w[0], Wn.w[1], Wh1, Wh2, true, g.dq + o);
    nlk::inner_gradient(sm, d, dh, Wt.w[0], Wt.w[1], bias);
    nlk::chain_in(sm, d, dh, Wh1, Wh2);
    // dα = ⟨Ŵ, W_t⟩ ; dθ = −(⟨Ŵ, G_t⟩ + 2λ_loc (⟨Ŵ, W_t⟩ − ⟨Ŵ, B⟩) + 2λ₂ ⟨Ŵ, W_t⟩)
    acc_t hw = 0, hb = 0;
    for (int i = tid; i < n; i += nt) {
      hw += Wh1[i] * Wt.w[0][i];
      hb += Wh1[i] * B1[i];
    }
    for (int i = tid; i < n; i += nt) {
      hw += Wh2[i] * Wt.w[1][i];
      hb += Wh2[i] * B2[i];
    }
    sm.red[tid] = hw;
    sm.red[nt + tid] = hb;
    nlk::block_sums(sm.red, 2);
    if (tid == 0) {
      const acc_t w = sm.red[0], bb = sm.red[nt];
      g.dalpha[sq.gate(t)] = static_cast<float>(w);
      g.dtheta[sq.gate(t)] = static_cast<float>(-(nlk::inner_grad_dot(sm, d, dh) + 2.0 * hp.lloc * (w - bb) + 2.0 * hp.l2 * w));
    }
    // dB += 2λ_loc θ Ŵ ; D = (α − θ(2λ_loc + 2λ₂)) Ŵ + chain (each thread its own entries)
    const adj_t pull = 2.0 * hp.lloc * th, keep = al - th * (2.0 * hp.lloc + 2.0 * hp.l2);
    for (int i = tid; i < n; i += nt) {
      Bb1[i] += pull * Wh1[i];
      Wh1[i] *= keep;
    }
    for (int i = tid; i < n; i += nt) {
      Bb2[i] += pull * Wh2[i];
      Wh2[i] *= keep;
    }
    __syncthreads();
    nlk::chain_out(sm, d, dh, -th, Wt.w[0], Wt.w[1], Wh1, Wh2, bias, g.dk + o, g.dv + o);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(yaad, nlk::MlpWalk<Yaad>)

#include "gen/yaad_pair.inc"
