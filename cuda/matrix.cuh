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
  __host__ __device__ ErrorBwdSmem(Carver& c, int d, int nt, int nred)
      : dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(d)), e(c.take<float>(d)), de(c.take<acc_t>(d)),
        red(c.take<acc_t>(static_cast<size_t>(nred) * nt)) {}
};

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

}  // namespace nlk
