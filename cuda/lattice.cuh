/*
 * Lattice OSR (docs/spec/miras-compression.md#lattice; reference src/rules/lattice.ts): the arithmetic
 * the pair (lattice.cu) and the frozen read (lattice_frozen.cu) share, so both read the slots with
 * the same bits: the slot products, the read weights w = softmax(S q) rounded to f32 where the
 * reference stores them, and the read y_j = Σ_i w_i S[i][j].
 */
#pragma once

#include "gen/nlk_rules.cuh"

namespace nlk::slots {

/** Below this the tangent step is degenerate and the slot keeps its old value (§5.3, §5.6). */
constexpr double kFallback = 1e-8;
/** The variant hyperparameter's values, in the declaration's order. */
enum Variant { kDecode = 0, kEncode = 1, kSimilarity = 2 };

/** S[0..d) · x[0..d), summed in order in acc_t. */
__device__ inline acc_t dot_row(const float* S, const float* x, int d) {
  acc_t s = 0;
  for (int j = 0; j < d; j++) s += static_cast<acc_t>(S[j]) * x[j];
  return s;
}

/** w = softmax(ρ) over m slots (max subtracted), each weight rounded to f32 as the reference stores it. */
__device__ inline void softmax_weights(const acc_t* rho, int m, float* w) {
  acc_t mx = -INFINITY, sum = 0;
  for (int i = 0; i < m; i++) mx = rho[i] > mx ? rho[i] : mx;
  for (int i = 0; i < m; i++) sum += exp(rho[i] - mx);
  for (int i = 0; i < m; i++) w[i] = static_cast<float>(exp(rho[i] - mx) / sum);
}

/** Column j of the read: Σ_i w_i S[i][j] over the m slots of S [m, d], rounded once. */
__device__ inline float read_col(const float* S, const float* w, int m, int d, int j) {
  acc_t acc = 0;
  for (int i = 0; i < m; i++) acc += static_cast<acc_t>(w[i]) * S[static_cast<size_t>(i) * d + j];
  return static_cast<float>(acc);
}

}  // namespace nlk::slots
