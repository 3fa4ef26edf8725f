/*
 * Shared-memory layouts of the matrix-memory pairs. Every row of M reads the whole token vector,
 * so the block stages a token's vectors once in shared memory. Atlas stages ω where these stage v,
 * and Hebbian's backward has no error term: those two keep layouts of their own.
 */
#pragma once

#include "common.cuh"

namespace nlk {

/** Forward of Delta, Titans, Hebbian: the token's k, v, q. */
struct KvqSmem {
  float *k, *v, *q;
  __host__ __device__ KvqSmem(Carver& c, int d) : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)) {}
  /** Token t's rows of the [s, d] inputs (no barrier). */
  __device__ void load(int t, int d, const float* kk, const float* vv, const float* qq) const {
    load_vec(k, kk + t * d, d);
    load_vec(v, vv + t * d, d);
    load_vec(q, qq + t * d, d);
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
  /** Token t's rows of the [s, d] inputs and saved errors (no barrier). */
  __device__ void load(int t, int d, const float* dyy, const float* qq, const float* kk, const float* ee) const {
    load_vec(dy, dyy + t * d, d);
    load_vec(q, qq + t * d, d);
    load_vec(k, kk + t * d, d);
    load_vec(e, ee + t * d, d);
  }
};

}  // namespace nlk
