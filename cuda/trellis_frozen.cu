/*
 * Frozen read of Trellis, ABI v2 (docs/spec/miras-compression.md#trellis-frozen, docs/spec/decisions.md#d3;
 * reference src/rules/trellis.ts trellisFrozen): r_t = S_K q_t, ĉ_t = nsilu(r_t), y_t = S_V ĉ_t, and
 * its VJP dr_t = nsilu'(r_t)ᵀ (S_Vᵀ dy_t), dq_t = S_Kᵀ dr_t, dS_V = Σ_t dy_t ĉ_tᵀ, dS_K = Σ_t dr_t q_tᵀ.
 * One block per sequence (b, h). Tokens are independent, so in the per-token phase a thread owns a
 * token; r_t (f32, as the reference stores it), ĉ_t and dr_t (f64, as in the reference) go to the
 * workspace. In the backward's second phase a thread owns rows of dS_K and dS_V and sums over
 * tokens in token order. The workspace is scratch: the backward recomputes r and ĉ.
 */
#include "trellis.cuh"

namespace {

/** Per-token scratch of all B·H sequences: r [T][dk] f32, ĉ and dr [T][dk] f64. */
struct FrozenWs {
  float* r;
  acc_t *ch, *dr;
  __host__ __device__ FrozenWs(nlk::Carver& c, const nlk::Shape& s, int dk) {
    const size_t n = static_cast<size_t>(s.seqs()) * s.T * dk;
    r = c.take<float>(n);
    ch = c.take<acc_t>(n);
    dr = c.take<acc_t>(n);
  }
  /** Offset of token t of sequence sn in the per-token arrays. */
  __device__ static size_t at(const nlk::Shape& s, size_t sn, int t, int dk) { return (sn * s.T + t) * dk; }
};

/** r_t = S_K q_t rounded to f32 and ĉ_t = nsilu(r_t) in f64, for one token (one thread). */
__device__ void read_token(const float* SK, const float* q, int d, int dk, float* r, acc_t* ch) {
  for (int l = 0; l < dk; l++) {
    acc_t acc = 0;
    for (int j = 0; j < d; j++) acc += static_cast<acc_t>(SK[l * d + j]) * q[j];
    r[l] = static_cast<float>(acc);
  }
  const acc_t norm = nlk::silu_norm(r, dk);
  const acc_t scale = norm <= nlk::kNsiluEps ? 0.0 : sqrt(static_cast<acc_t>(dk)) / norm;
  for (int l = 0; l < dk; l++) ch[l] = scale * nlk::silu<acc_t>(r[l]);
}

__global__ void trellis_frozen_read_kernel(nlk::Shape s, int dk, const float* __restrict__ Q, const float* __restrict__ SKall,
                                           const float* __restrict__ SVall, float* __restrict__ Y, unsigned char* wsb) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  nlk::Carver cv(wsb);
  const FrozenWs ws(cv, s, dk);
  const size_t n = static_cast<size_t>(dk) * d;
  const float *SK = SKall + sq.state(n), *SV = SVall + sq.state(n);
  for (int t = threadIdx.x; t < s.T; t += blockDim.x) {
    const size_t o = sq.vec(t), oc = FrozenWs::at(s, sq.n, t, dk);
    read_token(SK, Q + o, d, dk, ws.r + oc, ws.ch + oc);
    for (int i = 0; i < d; i++) {
      acc_t acc = 0;
      for (int l = 0; l < dk; l++) acc += static_cast<acc_t>(SV[i * dk + l]) * ws.ch[oc + l];
      Y[o + i] = static_cast<float>(acc);
    }
  }
}

/** dq, dS_K, dS_V; dy NULL = zero. */
__global__ void trellis_frozen_vjp_kernel(nlk::Shape s, int dk, const float* __restrict__ Q, const float* __restrict__ SKall,
                                          const float* __restrict__ SVall, const float* __restrict__ DY, float* __restrict__ DQ,
                                          float* __restrict__ DSK, float* __restrict__ DSV, unsigned char* wsb) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  nlk::Carver cv(wsb);
  const FrozenWs ws(cv, s, dk);
  const size_t n = static_cast<size_t>(dk) * d;
  const float *SK = SKall + sq.state(n), *SV = SVall + sq.state(n);
  // per token: ĉ_t, dr_t (dĉ = S_Vᵀ dy into dr, then the nsilu VJP in place), dq_t = S_Kᵀ dr_t
  for (int t = threadIdx.x; t < s.T; t += blockDim.x) {
    const size_t o = sq.vec(t), oc = FrozenWs::at(s, sq.n, t, dk);
    float* r = ws.r + oc;
    acc_t* dr = ws.dr + oc;
    read_token(SK, Q + o, d, dk, r, ws.ch + oc);
    for (int l = 0; l < dk; l++) {
      acc_t acc = 0;
      if (DY != nullptr)
        for (int i = 0; i < d; i++) acc += static_cast<acc_t>(SV[i * dk + l]) * DY[o + i];
      dr[l] = acc;
    }
    nlk::nsilu_vjp(r, dr, dk, dr);
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int l = 0; l < dk; l++) acc += static_cast<acc_t>(SK[l * d + j]) * dr[l];
      DQ[o + j] = static_cast<float>(acc);
    }
  }
  __syncthreads();  // every token's ĉ and dr are in the workspace
  float *dSK = DSK + sq.state(n), *dSV = DSV + sq.state(n);
  for (int l = threadIdx.x; l < dk; l += blockDim.x)
    for (int j = 0; j < d; j++) {
      acc_t acc = 0;
      for (int t = 0; t < s.T; t++) acc += ws.dr[FrozenWs::at(s, sq.n, t, dk) + l] * Q[sq.vec(t) + j];
      dSK[l * d + j] = static_cast<float>(acc);
    }
  for (int i = threadIdx.x; i < d; i += blockDim.x)
    for (int l = 0; l < dk; l++) {
      acc_t acc = 0;
      if (DY != nullptr)
        for (int t = 0; t < s.T; t++) acc += static_cast<acc_t>(DY[sq.vec(t) + i]) * ws.ch[FrozenWs::at(s, sq.n, t, dk) + l];
      dSV[i * dk + l] = static_cast<float>(acc);
    }
}

/** Threads per block: the per-token phase wants T of them, the row phase d. */
int frozen_threads(const nlk::Shape& s) { return nlk::threads_for(s.T > s.d ? s.T : s.d); }

}  // namespace

// ── launchers (the contract of cuda/gen/nlk_rules.cuh) ─────────────────────────────────────

namespace nlk::trellis {

int frozen_workspace_bytes(const Shape& shape, const Hyper& hyper, size_t* bytes) {
  Carver c(nullptr);
  FrozenWs ws(c, shape, hyper.d_compress);
  (void)ws;
  *bytes = c.off;
  return NLK_OK;
}

int frozen_forward(const FrozenForwardArgs& a) {
  NLK_LAUNCH(trellis_frozen_read_kernel, a.shape.seqs(), frozen_threads(a.shape), 0)
  (a.shape, a.hyper.d_compress, a.q, a.state.S_K, a.state.S_V, a.y, a.ws);
  return launch_status();
}

int frozen_backward(const FrozenBackwardArgs& a) {
  NLK_LAUNCH(trellis_frozen_vjp_kernel, a.shape.seqs(), frozen_threads(a.shape), 0)
  (a.shape, a.hyper.d_compress, a.q, a.state.S_K, a.state.S_V, a.dy, a.dq, a.dstate.S_K, a.dstate.S_V, a.ws);
  return launch_status();
}

}  // namespace nlk::trellis

#include "gen/trellis_frozen.inc"
