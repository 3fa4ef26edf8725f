/*
 * Shared by the Trellis pair and its frozen read: the normalised silu
 * nsilu(u) = √n · silu(u)/‖silu(u)‖ (0 when ‖silu(u)‖ <= 1e-8). The norm and the VJP live here so
 * both apply one guard and one formula, in one order.
 */
#pragma once

#include "gen/nlk_rules.cuh"

namespace nlk {

constexpr double kNsiluEps = 1e-8;

/** ‖silu(u)‖ over n entries (one thread). */
__device__ inline acc_t silu_norm(const float* u, int n) {
  acc_t ss = 0;
  for (int j = 0; j < n; j++) {
    const acc_t sj = silu<acc_t>(u[j]);
    ss += sj * sj;
  }
  return sqrt(ss);
}

/** out = VJP of nsilu at u for upstream g, given norm = silu_norm(u, n) above the guard (one thread; out may be g). */
__device__ inline void nsilu_vjp_at(const float* u, const acc_t* g, int n, acc_t norm, acc_t* out) {
  acc_t c = 0;
  for (int j = 0; j < n; j++) c += (silu<acc_t>(u[j]) / norm) * g[j];
  const acc_t k = sqrt(static_cast<acc_t>(n)) / norm;
  for (int j = 0; j < n; j++) out[j] = k * (g[j] - silu<acc_t>(u[j]) / norm * c) * silu_prime<acc_t>(u[j]);
}

/** out = VJP of nsilu at u for upstream g (one thread; out may be g); 0 below the norm guard. */
__device__ inline void nsilu_vjp(const float* u, const acc_t* g, int n, acc_t* out) {
  const acc_t norm = silu_norm(u, n);
  if (norm <= kNsiluEps) {
    for (int j = 0; j < n; j++) out[j] = 0;
    return;
  }
  nsilu_vjp_at(u, g, n, norm, out);
}

}  // namespace nlk
