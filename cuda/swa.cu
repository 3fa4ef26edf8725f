/*
 * Sliding-window attention kernel pair, ABI v2 (docs/spec/titans-family.md#swa; reference
 * src/rules/swa.ts; contract docs/spec/kernel-abi.md). Every (b, h) of the ABI is an independent
 * sequence of width d (docs/spec/kernel-abi.md#shapes); within it the rule's own `heads` (nh) split
 * d into nh·hd, as in the reference with H = 1. Per rule head r (columns [r·hd, (r+1)·hd)) and
 * position i, τ = 1/√hd, j0 = max(0, i − ws + 1), L = i − j0 + 1:
 *   P[r,i,w] = softmax_w(τ ⟨Q[i,r], K[j0+w,r]⟩) for w < L ;  A[i,r] = Σ_w P_w V[j0+w,r]
 * No state, so no checkpoint interval: the forward saves P (f32, as the reference keeps it) and the
 * backward reads it. A thread owns a (rule head, position) row. The backward first writes
 * dS = τ P (dP − ⟨P, dP⟩) per row (and dQ), then, after a barrier, gathers dK and dV per
 * (rule head, key position) in query order: no two threads ever add into the same element.
 */
#include "gen/nlk_rules.cuh"

namespace {

/**
 * Workspace for all B·H sequences: the saved weights P first (the backward never writes them), then
 * f64 scratch of the same shape (the forward's exponentials, the backward's dS). A row keeps
 * wl = min(window, T) entries: a window longer than the sequence never has more visible positions.
 */
struct SwaWs {
  int nh, T, wl;
  size_t per;  // nh·T·wl entries per sequence
  float* P;    // [seqs][nh][T][wl]
  acc_t* sc;   // [seqs][nh][T][wl]
  __host__ __device__ SwaWs(nlk::Carver& c, const nlk::Shape& s, const nlk::swa::Hyper& hy)
      : nh(hy.heads), T(s.T), wl(hy.window < s.T ? hy.window : s.T), per(static_cast<size_t>(hy.heads) * s.T * wl) {
    P = c.take<float>(static_cast<size_t>(s.seqs()) * per);
    sc = c.take<acc_t>(static_cast<size_t>(s.seqs()) * per);
  }
  /** Offset of row (r, i) of sequence n. */
  __host__ __device__ size_t row(size_t n, int r, int i) const { return n * per + (static_cast<size_t>(r) * T + i) * wl; }
};

/** τ ⟨Q[i, r], K[j, r]⟩ over the hd columns from c0 of sequence sq. */
__device__ inline acc_t score(const nlk::Seq& sq, const float* Q, const float* K, int c0, int hd, int i, int j, acc_t tau) {
  const float *q = Q + sq.vec(i) + c0, *k = K + sq.vec(j) + c0;
  acc_t acc = 0;
  for (int c = 0; c < hd; c++) acc += static_cast<acc_t>(q[c]) * k[c];
  return tau * acc;
}

struct Args {
  nlk::Shape s;
  nlk::swa::Hyper hy;
  nlk::swa::Inputs in;
  const float* DY;
  float* Y;
  nlk::swa::Grads g;
  unsigned char* ws;
};

__global__ void swa_forward_kernel(Args a) {
  const nlk::Seq sq(a.s, blockIdx.x);
  nlk::Carver c(a.ws);
  const SwaWs ws(c, a.s, a.hy);
  const int T = a.s.T, nh = ws.nh, win = a.hy.window, hd = a.s.d / nh;
  const acc_t tau = 1.0 / sqrt(static_cast<acc_t>(hd));
  for (int row = threadIdx.x; row < nh * T; row += blockDim.x) {
    const int r = row / T, i = row % T, c0 = r * hd;
    const int j0 = i - win + 1 > 0 ? i - win + 1 : 0, L = i - j0 + 1;
    float* p = ws.P + ws.row(sq.n, r, i);
    acc_t* e = ws.sc + ws.row(sq.n, r, i);
    acc_t mx = -INFINITY, sum = 0;
    for (int w = 0; w < L; w++) {
      e[w] = score(sq, a.in.q, a.in.k, c0, hd, i, j0 + w, tau);
      mx = e[w] > mx ? e[w] : mx;
    }
    for (int w = 0; w < L; w++) {
      e[w] = exp(e[w] - mx);
      sum += e[w];
    }
    // the masked slots hold exactly 0 (their scores are −∞)
    for (int w = 0; w < ws.wl; w++) p[w] = w < L ? static_cast<float>(e[w] / sum) : 0.0f;
    float* y = a.Y + sq.vec(i) + c0;
    for (int cc = 0; cc < hd; cc++) {
      acc_t acc = 0;
      for (int w = 0; w < L; w++) acc += static_cast<acc_t>(p[w]) * a.in.v[sq.vec(j0 + w) + c0 + cc];
      y[cc] = static_cast<float>(acc);
    }
  }
}

__global__ void swa_backward_kernel(Args a) {
  const nlk::Seq sq(a.s, blockIdx.x);
  nlk::Carver c(a.ws);
  const SwaWs ws(c, a.s, a.hy);
  const int T = a.s.T, nh = ws.nh, win = a.hy.window, hd = a.s.d / nh;
  const acc_t tau = 1.0 / sqrt(static_cast<acc_t>(hd));
  const float *K = a.in.k, *V = a.in.v, *Q = a.in.q, *DY = a.DY;
  if (DY == nullptr) {  // dy = 0: every gradient is exactly zero
    for (int t = threadIdx.x; t < T; t += blockDim.x)
      for (int j = 0; j < a.s.d; j++) a.g.dq[sq.vec(t) + j] = a.g.dk[sq.vec(t) + j] = a.g.dv[sq.vec(t) + j] = 0.0f;
    return;
  }
  for (int row = threadIdx.x; row < nh * T; row += blockDim.x) {
    const int r = row / T, i = row % T, c0 = r * hd;
    const int j0 = i - win + 1 > 0 ? i - win + 1 : 0, L = i - j0 + 1;
    const float* P = ws.P + ws.row(sq.n, r, i);
    acc_t* dS = ws.sc + ws.row(sq.n, r, i);
    const float* dy = DY + sq.vec(i) + c0;
    acc_t pdp = 0;
    for (int w = 0; w < L; w++) {
      const float* v = V + sq.vec(j0 + w) + c0;
      acc_t dp = 0;
      for (int cc = 0; cc < hd; cc++) dp += static_cast<acc_t>(dy[cc]) * v[cc];
      dS[w] = dp;  // dP for now
      pdp += static_cast<acc_t>(P[w]) * dp;
    }
    for (int w = 0; w < L; w++) dS[w] = tau * P[w] * (dS[w] - pdp);
    for (int cc = 0; cc < hd; cc++) {
      acc_t acc = 0;
      for (int w = 0; w < L; w++) acc += dS[w] * K[sq.vec(j0 + w) + c0 + cc];
      a.g.dq[sq.vec(i) + c0 + cc] = static_cast<float>(acc);
    }
  }
  __syncthreads();  // every row's dS is in the workspace
  // key position j is in the window of queries i = j .. j + ws − 1, at offset w = j − j0(i)
  for (int row = threadIdx.x; row < nh * T; row += blockDim.x) {
    const int r = row / T, j = row % T, c0 = r * hd;
    for (int cc = 0; cc < hd; cc++) {
      acc_t gk = 0, gv = 0;
      for (int i = j; i < T && i < j + win; i++) {
        const int j0 = i - win + 1 > 0 ? i - win + 1 : 0;
        const size_t pw = ws.row(sq.n, r, i) + (j - j0);
        gk += ws.sc[pw] * Q[sq.vec(i) + c0 + cc];
        gv += static_cast<acc_t>(ws.P[pw]) * DY[sq.vec(i) + c0 + cc];
      }
      a.g.dk[sq.vec(j) + c0 + cc] = static_cast<float>(gk);
      a.g.dv[sq.vec(j) + c0 + cc] = static_cast<float>(gv);
    }
  }
}

}  // namespace

// ── launchers (the contract of cuda/gen/nlk_rules.cuh) ─────────────────────────────────────

namespace nlk::swa {

int workspace_bytes(const Shape& shape, int, const Hyper& hyper, size_t* bytes) {
  Carver c(nullptr);
  const SwaWs ws(c, shape, hyper);
  (void)ws;
  *bytes = c.off;
  return NLK_OK;
}

int forward(const ForwardArgs& a) {
  NLK_LAUNCH(swa_forward_kernel, a.shape.seqs(), threads_for(a.hyper.heads * a.shape.T), 0)
  (Args{a.shape, a.hyper, a.in, nullptr, a.y, {}, a.ws});
  return launch_status();
}

int backward(const BackwardArgs& a) {
  NLK_LAUNCH(swa_backward_kernel, a.shape.seqs(), threads_for(a.hyper.heads * a.shape.T), 0)
  (Args{a.shape, a.hyper, a.in, a.dy, nullptr, a.grad, a.ws});
  return launch_status();
}

}  // namespace nlk::swa


#include "gen/swa_pair.inc"
