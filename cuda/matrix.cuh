/*
 * Shared by the matrix-memory pairs (Delta, Titans, Hebbian, Atlas): the shared-memory layouts that
 * stage a token's vectors once per block (every row of M reads the whole vector), and the walk's
 * workspace for d×d states (walk.cuh; docs/spec/kernel-abi.md#checkpointing).
 */
#pragma once

#include "walk.cuh"

namespace nlk {

/** Forward of Delta, Titans, Hebbian: the token's k, v, q. */
struct KvqSmem {
  float *k, *v, *q;
  __host__ __device__ KvqSmem() {}
  __host__ __device__ KvqSmem(Carver& c, int d) : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)) {}
  /** Token t of sequence `sq` (no barrier). */
  __device__ void load(const Seq& sq, int t, const float* kk, const float* vv, const float* qq) const {
    const size_t o = sq.vec(t);
    load_vec(k, kk + o, static_cast<int>(sq.d));
    load_vec(v, vv + o, static_cast<int>(sq.d));
    load_vec(q, qq + o, static_cast<int>(sq.d));
  }
};

/** Row i of the prediction error e = M k − v of Delta and Titans, rounded as the reference stores it. */
__device__ inline float error_row(const float* M, const KvqSmem& sm, int i, int d) {
  acc_t pred = 0;
  for (int j = 0; j < d; j++) pred += static_cast<acc_t>(M[i * d + j]) * sm.k[j];
  return static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(sm.v[i]));
}

/** Backward of the error-driven rules (Delta, Titans): dy, q, k, e, de = ∂L/∂e and `nred` partial rows. */
struct ErrorBwdSmem {
  float *dy, *q, *k, *e;
  acc_t *de, *red;
  __host__ __device__ ErrorBwdSmem() {}
  __host__ __device__ ErrorBwdSmem(Carver& c, int d, int nt, int nred)
      : dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(d)), e(c.take<float>(d)), de(c.take<acc_t>(d)),
        red(c.take<acc_t>(static_cast<size_t>(nred) * nt)) {}
};

/**
 * The column pass of an error rule's token backward (Delta, Gated Delta), after the barrier that
 * follows the row pass: dq = M_{t+1}ᵀ dy and dk = −θ Dᵀ e + s · Mpᵀ de, where Mp is the state the
 * prediction read and s its factor (1 for Delta; 1 − α for Gated Delta, which predicts from the
 * decayed state). Threads take columns.
 */
template <class Grads, class S>
__device__ void error_columns(const Grads& g, size_t o, const ErrorBwdSmem& b, const adj_t* D, const float* Mn, const float* Mp, float tht,
                              S s, int d) {
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    acc_t gq = 0, ge = 0, gm = 0;
    for (int i = 0; i < d; i++) {
      gq += Mn[i * d + j] * b.dy[i];
      ge += D[i * d + j] * b.e[i];
      gm += Mp[i * d + j] * b.de[i];
    }
    g.dq[o + j] = static_cast<float>(gq);
    g.dk[o + j] = static_cast<float>(-tht * ge + s * gm);
  }
}

/**
 * The workspace of a rule with NS d×d state tensors (Delta, Hebbian: M; Titans, Atlas: M, S): the
 * walk's layout (walk.cuh) with one f64 adjoint per state tensor and a per-token record of d floats
 * (Delta's and Titans' error e).
 */
template <int NS>
struct MatrixWs : WalkWs<NS, NS> {
  size_t dd;
  __host__ __device__ MatrixWs(Carver& c, const Shape& s, int C)
      : WalkWs<NS, NS>(c, s, C, Repeat<NS>(static_cast<size_t>(s.d) * s.d).v, Repeat<NS>(static_cast<size_t>(s.d) * s.d).v, s.d),
        dd(static_cast<size_t>(s.d) * s.d) {}
};

/**
 * What the matrix rules share on the walk (walk.cuh): NS d×d state tensors (MatrixWs), threads over
 * the d rows, the forward's shared memory FwdSmem(c, d) and the backward's BwdSmem(c, d, nt) (which
 * holds a FwdSmem `fw` for the replay), one f64 adjoint per state tensor that starts as d(final
 * state) and ends as d(initial state). A rule derives from it (`using MatrixRule::MatrixRule;`) and
 * adds kForwardName, kBackwardName, step and token.
 */
template <class Fwd, class Bwd, int NS, class FwdSmem, class BwdSmem>
struct MatrixRule : WalkRule<Fwd, Bwd> {
  using Hyper = typename WalkRule<Fwd, Bwd>::Hyper;
  using Ws = MatrixWs<NS>;
  static __host__ __device__ Ws workspace(Carver& c, const Shape& s, int C, const Hyper&) { return Ws(c, s, C); }
  static int threads(const Shape& s, const Hyper&) { return threads_for(s.d); }
  static size_t forward_smem(const Shape& s, const Hyper&, int) { return layout_bytes<FwdSmem>(s.d); }
  static size_t backward_smem(const Shape& s, const Hyper&, int nt) { return layout_bytes<BwdSmem>(s.d, nt); }

  decltype(Fwd::in) in;
  Seq sq;
  const Ws& ws;
  BwdSmem sm;  // the forward carves sm.fw only
  const Bwd* b = nullptr;
  adj_t* adj[NS] = {};  // ∂L/∂(state after token t), per state tensor

  __device__ MatrixRule(const Fwd& a, const Seq& s, const Ws& w) : in(a.in), sq(s), ws(w) { sm.fw = carve_shared<FwdSmem>(a.shape.d); }
  __device__ MatrixRule(const Bwd& a, const Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), sm(carve_shared<BwdSmem>(a.shape.d, static_cast<int>(blockDim.x))), b(&a) {}
  __device__ void begin_backward(const Bwd& a, const Seq&, const Ws&) {
    for (int w = 0; w < NS; w++) {
      adj[w] = ws.adjoint(sq.n, w);
      adjoint_from(adj[w], a.dstate[w], sq, ws.dd);
    }
  }
  /** After token 0 the adjoints are ∂L/∂(initial state). */
  __device__ void end_backward(const Bwd& a, const Seq&, const Ws&) const {
    for (int w = 0; w < NS; w++) adjoint_out(a.dstate0[w], adj[w], nullptr, sq, ws.dd);
  }
};

}  // namespace nlk
