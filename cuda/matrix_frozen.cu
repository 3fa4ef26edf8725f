/*
 * Frozen read of the matrix-memory rules (every rule whose declared frozen read is the shared
 * matrix read, listed by the generated gen/matrix_frozen.inc; docs/spec/titans-family.md
 * §2.4, §3, §4.3, §5.2, §6; reference src/rules/matrix.ts), ABI v2: y_t = M q_t, and its VJP
 * dq_t = Mᵀ dy_t, dM = Σ_t dy_t q_tᵀ. Titans and Atlas keep S too; the read ignores it (dS = 0).
 * One block per sequence (b, h); tokens are independent, so threads take rows of M for the read and
 * columns for dq; dM's row i is summed over tokens in token order by the thread that owns it.
 * No workspace.
 */
#include "gen/nlk_rules.cuh"

namespace {


__global__ void matrix_read_kernel(nlk::Shape s, const float* __restrict__ Q, const float* __restrict__ Mall, float* __restrict__ Y) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  const float* M = Mall + sq.state(sq.d * sq.d);
  for (int i = threadIdx.x; i < d; i += blockDim.x)
    for (int t = 0; t < s.T; t++) {
      const float* q = Q + sq.vec(t);
      acc_t acc = 0;
      for (int j = 0; j < d; j++) acc += M[i * d + j] * q[j];
      Y[sq.vec(t) + i] = static_cast<float>(acc);
    }
}

/** dq = Mᵀ dy (columns), dM = Σ_t dy qᵀ (rows), dS = 0 when the rule has S. dy NULL = zero. */
__global__ void matrix_read_vjp_kernel(nlk::Shape s, const float* __restrict__ Q, const float* __restrict__ Mall,
                                       const float* __restrict__ DY, float* __restrict__ DQ, float* __restrict__ DM,
                                       float* __restrict__ DS) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  const size_t dd = sq.d * sq.d;
  const float* M = Mall + sq.state(dd);
  for (int j = threadIdx.x; j < d; j += blockDim.x)
    for (int t = 0; t < s.T; t++) {
      acc_t acc = 0;
      if (DY != nullptr)
        for (int i = 0; i < d; i++) acc += M[i * d + j] * DY[sq.vec(t) + i];
      DQ[sq.vec(t) + j] = static_cast<float>(acc);
    }
  float* dM = DM + sq.state(dd);
  for (int i = threadIdx.x; i < d; i += blockDim.x)
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      if (DY != nullptr)
        for (int t = 0; t < s.T; t++) acc += static_cast<acc_t>(DY[sq.vec(t) + i]) * Q[sq.vec(t) + j];
      dM[i * d + j] = static_cast<float>(acc);
    }
  if (DS != nullptr)
    for (size_t i = threadIdx.x; i < dd; i += blockDim.x) DS[sq.state(dd) + i] = 0.0f;
}

int read(const nlk::Shape& s, const float* q, const float* M, float* y) {
  NLK_LAUNCH(matrix_read_kernel, s.seqs(), nlk::threads_for(s.d), 0)(s, q, M, y);
  return nlk::launch_status();
}

int read_vjp(const nlk::Shape& s, const float* q, const float* M, const float* dy, float* dq, float* dM, float* dS) {
  NLK_LAUNCH(matrix_read_vjp_kernel, s.seqs(), nlk::threads_for(s.d), 0)(s, q, M, dy, dq, dM, dS);
  return nlk::launch_status();
}

}  // namespace

// The matrix rules' launchers: the same read; S (Titans, Atlas) gets a zero gradient.
#define NLK_MATRIX_FROZEN(rule, DS)                                                                         \
  namespace nlk::rule {                                                                                     \
  int frozen_workspace_bytes(const Shape&, const Hyper&, size_t* bytes) {                                   \
    *bytes = 0;                                                                                             \
    return NLK_OK;                                                                                          \
  }                                                                                                         \
  int frozen_forward(const FrozenForwardArgs& a) { return read(a.shape, a.q, a.state.M, a.y); }            \
  int frozen_backward(const FrozenBackwardArgs& a) { return read_vjp(a.shape, a.q, a.state.M, a.dy, a.dq, a.dstate.M, DS); } \
  }

#include "gen/matrix_frozen.inc"
