/*
 * Shared by the matrix-memory pairs (Delta, Titans, Hebbian, Atlas): the shared-memory layouts that
 * stage a token's vectors once per block (every row of M reads the whole vector), and the
 * checkpoint/workspace layout of a d×d state (docs/spec/kernel-abi.md#checkpointing).
 */
#pragma once

#include "gen/nlk_rules.cuh"

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

/** Copies n floats from global src to shared dst, or zeros when src is NULL (an absent dy). */
__device__ inline void load_vec_or_zero(float* dst, const float* src, int n) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src == nullptr ? 0.0f : src[j];
}

/**
 * Checkpointing (docs/spec/kernel-abi.md#checkpointing). The forward keeps the state after every
 * C-th token (not the initial state, an input, nor the final state, an output); the backward
 * rebuilds a chunk's states from its checkpoint. To keep the backward's scratch O(√C) states instead
 * of O(C), a chunk is replayed in sub-chunks of S = ⌈√C⌉ tokens: first the sub-chunk starts
 * (`sub`), then one sub-chunk at a time into `buf`. With C = 1 every state is kept and nothing is
 * replayed but one token.
 */
struct Checkpoints {
  int T, C, S, nchunks, nsub;
  __host__ __device__ Checkpoints(int T_, int C_) : T(T_), C(C_ < T_ ? C_ : T_) {
    S = 1;
    while (S * S < C) S++;
    nchunks = (T + C - 1) / C;
    nsub = (C + S - 1) / S;
  }
};

/**
 * Workspace of one d×d-state rule with `nstate` state tensors, for all B·H sequences: the forward's
 * saved region (checkpoints) first, then the backward's scratch. Built by the host (sizes, on a null
 * base) and by the kernels (pointers) from the same code, so the two cannot disagree.
 */
struct MatrixWs {
  int d;
  size_t dd;
  int nstate;
  Checkpoints ck;
  float* saved;  // [seqs][nstate][nchunks − 1][d·d]
  adj_t* adj;    // [seqs][nstate][d·d] the running adjoints
  float* sub;    // [seqs][nstate][nsub][d·d]
  float* buf;    // [seqs][nstate][S + 1][d·d]
  float* tok;    // [seqs][S][d] a per-token vector the replay keeps (Delta, Titans: e)
  __host__ __device__ MatrixWs(Carver& c, const Shape& s, int C, int nstate_) : d(s.d), dd(static_cast<size_t>(s.d) * s.d), nstate(nstate_), ck(s.T, C) {
    const size_t n = static_cast<size_t>(s.seqs()) * nstate;
    saved = c.take<float>(n * (ck.nchunks - 1) * dd);
    adj = c.take<adj_t>(n * dd);
    sub = c.take<float>(n * ck.nsub * dd);
    buf = c.take<float>(n * (ck.S + 1) * dd);
    tok = c.take<float>(static_cast<size_t>(s.seqs()) * ck.S * s.d);
  }
  /** Checkpoint j (1 ≤ j < nchunks: the state after token j·C) of state tensor `which` of sequence n. */
  __device__ float* checkpoint(size_t n, int which, int j) const { return saved + ((n * nstate + which) * (ck.nchunks - 1) + (j - 1)) * dd; }
  __device__ adj_t* adjoint(size_t n, int which) const { return adj + (n * nstate + which) * dd; }
  __device__ float* sub_start(size_t n, int which, int i) const { return sub + ((n * nstate + which) * ck.nsub + i) * dd; }
  __device__ float* slot(size_t n, int which, int i) const { return buf + ((n * nstate + which) * (ck.S + 1) + i) * dd; }
  __device__ float* token_vec(size_t n, int i) const { return tok + (n * ck.S + i) * d; }
};

/**
 * The forward of a checkpointed matrix rule with NS state tensors, for sequence n:
 * step(t, cur, next, e) runs token t — stages it, updates every row of every state from cur[w]
 * into next[w] (writing its per-token vector, Delta's and Titans' e, to e[0..d)) and y, with a
 * barrier before the update and one after it. The states ping-pong through
 * replay slots 0 and 1; the state after every C-th token is copied to its checkpoint.
 */
template <int NS, class Step>
__device__ void forward_checkpointed(const MatrixWs& ws, size_t n, int T, const float* const (&init)[NS], float* const (&out)[NS], Step step) {
  const float* cur[NS];
  float* next[NS];
  for (int w = 0; w < NS; w++) cur[w] = init[w];
  for (int t = 0; t < T; t++) {
    for (int w = 0; w < NS; w++) next[w] = ws.slot(n, w, t & 1);
    step(t, cur, next, ws.token_vec(n, 0));
    if ((t + 1) % ws.ck.C == 0 && t + 1 < T)
      for (int w = 0; w < NS; w++) block_copy(ws.checkpoint(n, w, (t + 1) / ws.ck.C), next[w], ws.dd);
    for (int w = 0; w < NS; w++) cur[w] = next[w];
  }
  for (int w = 0; w < NS; w++) block_copy(out[w], cur[w], ws.dd);
}

/**
 * The backward of a checkpointed matrix rule (docs/spec/kernel-abi.md#checkpointing), for sequence
 * n: the chunks from last to first; per chunk its start (init for chunk 0, else its checkpoint), the
 * sub-chunk starts S = ⌈√C⌉ tokens apart replayed from it, then per sub-chunk (last first) its states
 * replayed into slots 0..m and token(t, u) for its tokens from last to first, where slot u holds the
 * states before token t, slot u + 1 those after it, and ws.token_vec(n, u) its per-token vector. step is the forward's update without y: the
 * replayed states are the forward's bits.
 */
template <int NS, class Step, class Token>
__device__ void backward_checkpointed(const MatrixWs& ws, size_t n, int T, const float* const (&init)[NS], Step step, Token token) {
  const Checkpoints& ck = ws.ck;
  const float* from[NS];
  float* to[NS];
  // replays tokens t0 .. t0+m−1 from slot 0 into slots 1..m
  auto replay = [&](int t0, int m) {
    for (int u = 0; u < m; u++) {
      for (int w = 0; w < NS; w++) {
        from[w] = ws.slot(n, w, u);
        to[w] = ws.slot(n, w, u + 1);
      }
      step(t0 + u, from, to, ws.token_vec(n, u));
    }
  };
  auto copy_all = [&](int dst_kind, int dst_i, int src_kind, int src_i, int chunk) {
    for (int w = 0; w < NS; w++) {
      const float* src = src_kind == 0 ? (chunk == 0 ? init[w] : ws.checkpoint(n, w, chunk)) : src_kind == 1 ? ws.sub_start(n, w, src_i) : ws.slot(n, w, src_i);
      float* dst = dst_kind == 1 ? ws.sub_start(n, w, dst_i) : ws.slot(n, w, dst_i);
      block_copy(dst, src, ws.dd);
    }
    __syncthreads();
  };
  for (int j = ck.nchunks - 1; j >= 0; j--) {
    const int c0 = j * ck.C, len = c0 + ck.C < T ? ck.C : T - c0;
    const int nsub = (len + ck.S - 1) / ck.S;
    copy_all(1, 0, 0, 0, j);
    for (int i = 1; i < nsub; i++) {
      copy_all(2, 0, 1, i - 1, j);
      replay(c0 + (i - 1) * ck.S, ck.S);
      copy_all(1, i, 2, ck.S, j);
    }
    for (int i = nsub - 1; i >= 0; i--) {
      const int t0 = c0 + i * ck.S, m = t0 + ck.S < c0 + len ? ck.S : c0 + len - t0;
      copy_all(2, 0, 1, i, j);
      replay(t0, m);
      for (int u = m - 1; u >= 0; u--) token(t0 + u, u);
    }
  }
}

/** Bytes of MatrixWs for a shape. */
inline size_t matrix_ws_bytes(const Shape& s, int C, int nstate) {
  Carver c(nullptr);
  MatrixWs ws(c, s, C, nstate);
  (void)ws;
  return c.off;
}

}  // namespace nlk
