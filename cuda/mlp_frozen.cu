/*
 * Frozen read of the MLP-memory rules (MONETA, YAAD, MEMORA), ABI v2 (docs/spec/miras-compression.md#moneta-frozen,
 * #yaad-frozen, #memora; D3; reference src/rules/mlp.ts mlpFrozenRead):
 *   y_t = W2 silu(W1 q_t) ;  δb_t = (W2ᵀ dy_t) ⊙ silu'(W1 q_t) ;  dq_t = W1ᵀ δb_t
 *   dW1 = Σ_t δb_t q_tᵀ ;  dW2 = Σ_t dy_t z_tᵀ
 * One block per sequence; the state gradients are summed over the tokens in token order in f64
 * (the workspace: 2·d·dh f64 per sequence, the backward's only) and stored once as f32.
 * Only d_hidden of each rule's hyperparameters matters here.
 */
#include "mlp.cuh"

namespace {

/** The backward's f64 sums of dW1, dW2 (the forward needs none, but the size query is shared). */
struct FrozenWs {
  size_t n;
  adj_t* acc;  // [seqs][2][n]
  __host__ __device__ FrozenWs(nlk::Carver& c, const nlk::Shape& s, int dh) : n(static_cast<size_t>(s.d) * dh) {
    acc = c.take<adj_t>(static_cast<size_t>(s.seqs()) * 2 * n);
  }
};

size_t frozen_ws_bytes(const nlk::Shape& s, int dh) {
  nlk::Carver c(nullptr);
  FrozenWs ws(c, s, dh);
  (void)ws;
  return c.off;
}

__global__ void mlp_frozen_read_kernel(nlk::Shape s, int dh, const float* __restrict__ Q, const float* __restrict__ W1all,
                                       const float* __restrict__ W2all, float* __restrict__ Y) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, static_cast<int>(blockDim.x));
  const size_t n = static_cast<size_t>(d) * dh;
  for (int t = 0; t < s.T; t++) {
    nlk::load_vec(sm.q, Q + sq.vec(t), d);
    __syncthreads();
    nlk::mlp_read(sm, d, dh, W1all + sq.state(n), W2all + sq.state(n), Y + sq.vec(t));
  }
}

__global__ void mlp_frozen_vjp_kernel(nlk::Shape s, int dh, const float* __restrict__ Q, const float* __restrict__ W1all,
                                      const float* __restrict__ W2all, const float* __restrict__ DY, unsigned char* wsp,
                                      float* __restrict__ DQ, float* __restrict__ DW1, float* __restrict__ DW2) {
  const nlk::Seq sq(s, blockIdx.x);
  const int d = s.d;
  const auto sm = nlk::carve_shared<nlk::MlpSmem>(d, dh, static_cast<int>(blockDim.x));
  nlk::Carver c(wsp);
  const FrozenWs ws(c, s, dh);
  const size_t n = ws.n;
  adj_t *D1 = ws.acc + sq.n * 2 * n, *D2 = D1 + n;
  for (int t = 0; t < s.T; t++) {
    nlk::load_vec(sm.q, Q + sq.vec(t), d);
    nlk::load_dy(sm, sq, t, DY);
    __syncthreads();
    nlk::read_vjp(sm, d, dh, W1all + sq.state(n), W2all + sq.state(n), D1, D2, t > 0, DQ + sq.vec(t));
  }
  nlk::adjoint_out(DW1, D1, nullptr, sq, n);
  nlk::adjoint_out(DW2, D2, nullptr, sq, n);
}

int frozen_read(const nlk::Shape& s, int dh, const float* q, const float* W1, const float* W2, float* y) {
  const int nt = nlk::mlp_threads(s.d, dh);
  NLK_LAUNCH(mlp_frozen_read_kernel, s.seqs(), nt, nlk::layout_bytes<nlk::MlpSmem>(s.d, dh, nt))(s, dh, q, W1, W2, y);
  return nlk::launch_status();
}

int frozen_read_vjp(const nlk::Shape& s, int dh, const float* q, const float* W1, const float* W2, const float* dy, unsigned char* ws,
             float* dq, float* dW1, float* dW2) {
  const int nt = nlk::mlp_threads(s.d, dh);
  NLK_LAUNCH(mlp_frozen_vjp_kernel, s.seqs(), nt, nlk::layout_bytes<nlk::MlpSmem>(s.d, dh, nt))(s, dh, q, W1, W2, dy, ws, dq, dW1, dW2);
  return nlk::launch_status();
}

}  // namespace

// The three rules' launchers: the same read of (W1, W2).
#define NLK_MLP_FROZEN(rule)                                                                                        \
  namespace nlk::rule {                                                                                             \
  int frozen_workspace_bytes(const Shape& s, const Hyper& h, size_t* bytes) {                                       \
    *bytes = frozen_ws_bytes(s, h.d_hidden);                                                                        \
    return NLK_OK;                                                                                                  \
  }                                                                                                                 \
  int frozen_forward(const FrozenForwardArgs& a) { return frozen_read(a.shape, a.hyper.d_hidden, a.q, a.state.W1, a.state.W2, a.y); } \
  int frozen_backward(const FrozenBackwardArgs& a) {                                                                \
    return frozen_read_vjp(a.shape, a.hyper.d_hidden, a.q, a.state.W1, a.state.W2, a.dy, a.ws, a.dq, a.dstate.W1, a.dstate.W2); \
  }                                                                                                                 \
  }

NLK_MLP_FROZEN(moneta)
NLK_MLP_FROZEN(yaad)
NLK_MLP_FROZEN(memora)

#include "gen/moneta_frozen.inc"
#include "gen/yaad_frozen.inc"
#include "gen/memora_frozen.inc"
