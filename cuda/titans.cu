/*
 * Titans LMM kernel pair, ABI v2 (docs/spec/titans-family.md#titans-forward,
 * docs/spec/titans-family.md#titans-backward, docs/spec/decisions.md#d7; reference src/rules/titans.ts):
 *   e_t = M_t k_t − v_t ;  S_{t+1} = η_t S_t − θ_t e_t k_tᵀ ;  M_{t+1} = (1 − α_t) M_t + S_{t+1}
 *   y_t = M_{t+1} q_t
 * One block per sequence (b, h); threads own rows of M and S (and of the adjoints D = ∂L/∂M_{t+1},
 * E = ∂L/∂S_{t+1}); products with a transposed matrix are column loops after a barrier. Two state
 * tensors (w = 0: M, w = 1: S) go through the walk (walk.cuh) together.
 */
#include "matrix.cuh"

namespace {

/** One token's update (the forward's and the replay's single body): e, S_next, M_next and y. */
NLK_NOINLINE __device__ void titans_step(const float* Mt, const float* St, float* Mn, float* Sn, const nlk::KvqSmem& sm, float alpha,
                                         float theta, float eta, int d, float* e, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta, et = eta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float ei = nlk::error_row(Mt, sm, i, d);
    e[i] = ei;
    const acc_t g = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      // as the reference: S_{t+1} enters M_{t+1} before it is rounded for storage
      const acc_t sn = et * St[i * d + j] + g * sm.k[j];
      Sn[i * d + j] = static_cast<float>(sn);
      const float m = static_cast<float>(static_cast<float>(keep * Mt[i * d + j]) + sn);
      Mn[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** The rule's step as the walk calls it: stage token t, (M_t, S_t) → (M_{t+1}, S_{t+1}), e (and y when given); barriers before and after. */
__device__ void titans_token(const nlk::titans::Inputs& in, const nlk::Seq& sq, const nlk::KvqSmem& sm, int t, const float* const* cur,
                             float* const* next, float* e, float* y) {
  sm.load(sq, t, in.k, in.v, in.q);
  __syncthreads();
  const size_t g = sq.gate(t);
  titans_step(cur[0], cur[1], next[0], next[1], sm, in.alpha[g], in.theta[g], in.eta[g], static_cast<int>(sq.d), e, y);
  __syncthreads();
}

using Ws = nlk::MatrixWs<2>;

__global__ void titans_forward_kernel(nlk::titans::ForwardArgs a) {
  const nlk::Seq sq(a.shape, blockIdx.x);
  const auto sm = nlk::carve_shared<nlk::KvqSmem>(a.shape.d);
  nlk::Carver c(a.ws);
  const Ws ws(c, a.shape, a.C);
  const float* init[2] = {a.state0.M + sq.state(ws.dd), a.state0.S + sq.state(ws.dd)};
  float* out[2] = {a.state.M + sq.state(ws.dd), a.state.S + sq.state(ws.dd)};
  nlk::walk_forward(ws, sq, init, out, a.y, [&](int t, const float* const* cur, float* const* next, float* e, float* y) {
    titans_token(a.in, sq, sm, t, cur, next, e, y);
  });
}

struct BwdSmem {
  nlk::KvqSmem fw;
  nlk::ErrorBwdSmem bw;
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 3) {}
};

/** Token t's backward (v1's arithmetic): D, E carried from token t+1 to token t. */
__device__ void token_backward(const nlk::titans::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, adj_t* E, const float* Mt, const float* St,
                               const float* Mn, const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t), gi = sq.gate(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  __syncthreads();
  const acc_t al = a.in.alpha[gi], tht = a.in.theta[gi], et = a.in.eta[gi];
  acc_t pa = 0, pe = 0, pth = 0;
  for (int i = tid; i < d; i += nt) {
    acc_t eki = 0;
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      const adj_t dij = D[ij] + static_cast<adj_t>(b.dy[i]) * b.q[j];  // the read y_t = M_{t+1} q_t
      D[ij] = dij;
      const adj_t eij = E[ij] + dij;  // M_{t+1} = (1−α)M_t + S_{t+1}: S_{t+1} receives all of D
      E[ij] = eij;
      pa += dij * Mt[ij];
      pe += static_cast<acc_t>(St[ij]) * eij;
      eki += eij * b.k[j];
    }
    pth += b.e[i] * eki;
    const acc_t dei = -tht * eki;
    b.de[i] = dei;
    a.grad.dv[o + i] = static_cast<float>(-dei);
  }
  b.red[tid] = pa;
  b.red[nt + tid] = pe;
  b.red[2 * nt + tid] = pth;
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, ge = 0, gm = 0;
    for (int i = 0; i < d; i++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      gq += static_cast<acc_t>(Mn[ij]) * b.dy[i];
      ge += E[ij] * b.e[i];
      gm += static_cast<acc_t>(Mt[ij]) * b.de[i];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(-tht * ge + gm);
  }
  if (tid == 0) {
    a.grad.dalpha[gi] = static_cast<float>(-nlk::ordered_sum(b.red, 0));
    a.grad.deta[gi] = static_cast<float>(nlk::ordered_sum(b.red, 1));
    a.grad.dtheta[gi] = static_cast<float>(-nlk::ordered_sum(b.red, 2));
  }
  __syncthreads();
  const adj_t keep = 1.0 - al;
  for (int i = tid; i < d; i += nt)
    for (int j = 0; j < d; j++) {
      const size_t ij = static_cast<size_t>(i) * d + j;
      D[ij] = keep * D[ij] + b.de[i] * b.k[j];
      E[ij] *= et;
    }
  __syncthreads();
}

__global__ void titans_backward_kernel(nlk::titans::BackwardArgs a) {
  const nlk::Seq sq(a.shape, blockIdx.x);
  const auto sm = nlk::carve_shared<BwdSmem>(a.shape.d, static_cast<int>(blockDim.x));
  nlk::Carver c(a.ws);
  const Ws ws(c, a.shape, a.C);
  adj_t *D = ws.adjoint(sq.n, 0), *E = ws.adjoint(sq.n, 1);  // ∂L/∂M_{t+1}, ∂L/∂S_{t+1}: start as d(final state)
  nlk::adjoint_from(D, a.dstate.M, sq, ws.dd);
  nlk::adjoint_from(E, a.dstate.S, sq, ws.dd);
  __syncthreads();
  const float* init[2] = {a.state0.M + sq.state(ws.dd), a.state0.S + sq.state(ws.dd)};
  nlk::walk_backward(
      ws, sq, init,
      [&](int t, const float* const* cur, float* const* next, float* e, float* y) { titans_token(a.in, sq, sm.fw, t, cur, next, e, y); },
      [&](int t, const float* const* before, const float* const* after, const float* e) { token_backward(a, sq, sm, D, E, before[0], before[1], after[0], e, t); });
  // after token 0: ∂L/∂M_0, ∂L/∂S_0
  nlk::adjoint_out(a.dstate0.M, D, nullptr, sq, ws.dd);
  nlk::adjoint_out(a.dstate0.S, E, nullptr, sq, ws.dd);
}

}  // namespace

namespace nlk::titans {

int workspace_bytes(const Shape& shape, int C, const Hyper&, size_t* bytes) {
  *bytes = layout_bytes<Ws>(shape, C);
  return NLK_OK;
}

int forward(const ForwardArgs& a) {
  NLK_LAUNCH(titans_forward_kernel, a.shape.seqs(), threads_for(a.shape.d), layout_bytes<KvqSmem>(a.shape.d))(a);
  return launch_status();
}

int backward(const BackwardArgs& a) {
  const int nt = threads_for(a.shape.d);
  NLK_LAUNCH(titans_backward_kernel, a.shape.seqs(), nt, layout_bytes<BwdSmem>(a.shape.d, nt))(a);
  return launch_status();
}

}  // namespace nlk::titans

#include "gen/titans_pair.inc"
