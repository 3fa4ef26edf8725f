/*
 * The checkpointed walk of every recurrent pair (docs/spec/kernel-abi.md#checkpointing): one
 * workspace layout for NS state tensors of any sizes and NA running adjoints, the forward that keeps
 * the state after every C-th token, and the backward that replays each chunk with the rule's own step
 * and hands its tokens, last first, to the rule's token backward. A rule supplies two callables:
 *
 *   step(t, cur, next, tok, y)   token t: stage it, barrier, cur[w] -> next[w] for every state tensor,
 *                                its per-token record into tok, y (global, [d]) when y is not null,
 *                                barrier. The forward and the replay call this one function, so the
 *                                replayed states (and records) are the forward's bits for every C.
 *   token(t, before, after, tok) token t's backward: before[w] the states before it, after[w] after
 *                                it, tok the record its step wrote.
 *
 * With C = 1 every state is kept and the backward replays one token per chunk.
 */
#pragma once

#include "gen/nlk_rules.cuh"

namespace nlk {

/**
 * Chunks of C tokens (the last one shorter), each replayed in sub-chunks of S = ⌈√C⌉ tokens: first the
 * sub-chunk starts, then one sub-chunk at a time. That keeps the backward's scratch O(√C) states
 * instead of O(C) (the workspace bound of docs/spec/kernel-abi.md#workspace-bound).
 */
struct Checkpoints {
  int T, C, S, nchunks, nsub;
  __host__ __device__ Checkpoints(int T_, int C_) : T(T_), C(C_ < T_ ? C_ : T_) {
    S = 1;
    while (S * S < C) S++;
    nchunks = (T + C - 1) / C;
    nsub = (C + S - 1) / S;
  }
  /** Tokens in chunk j. */
  __host__ __device__ int chunk_len(int j) const { return j * C + C < T ? C : T - j * C; }
};

/**
 * Workspace of a checkpointed pair for all B·H sequences: the forward's saved region first (the
 * backward never writes it), then the backward's scratch. A step's state is the NS tensors stored
 * together (tensor w: `size[w]` floats); NA adjoint arrays (adjoint i: `adj_size[i]` entries of adj_t);
 * a per-token record of `rec` floats (none when 0). Per sequence:
 *   saved  [nchunks − 1][step]   the state after tokens C, 2C, … (not the initial state, an input,
 *                                nor the final one, an output)
 *   adj    [Σ adj_size]          the running adjoints
 *   sub    [nsub][step]          the sub-chunk starts of the chunk being replayed
 *   buf    [S + 1][step]         the replay slots (the forward ping-pongs through slots 0 and 1)
 *   tok    [S][rec]              the records of the replayed sub-chunk (the forward's: record 0)
 * Built by the host on a null base (the size) and by the kernels on the workspace (the pointers) from
 * the same code, so the two cannot disagree. A rule carves its own extra scratch after it.
 */
template <int NS, int NA>
struct WalkWs {
  static constexpr int kStates = NS, kAdjoints = NA;
  Checkpoints ck;
  size_t size[NS], off[NS], step;
  size_t adj_off[NA], adj_step;
  size_t rec;
  float *saved, *sub, *buf, *tok;
  adj_t* adj;
  __host__ __device__ WalkWs(Carver& c, const Shape& s, int C, const size_t (&size_)[NS], const size_t (&adj_size)[NA], size_t rec_)
      : ck(s.T, C), step(0), adj_step(0), rec(rec_), tok(nullptr) {
    for (int w = 0; w < NS; w++) {
      size[w] = size_[w];
      off[w] = step;
      step += size_[w];
    }
    for (int i = 0; i < NA; i++) {
      adj_off[i] = adj_step;
      adj_step += adj_size[i];
    }
    const size_t seqs = static_cast<size_t>(s.seqs());
    saved = c.take<float>(seqs * (ck.nchunks - 1) * step);
    adj = c.take<adj_t>(seqs * adj_step);
    sub = c.take<float>(seqs * ck.nsub * step);
    buf = c.take<float>(seqs * (ck.S + 1) * step);
    if (rec > 0) tok = c.take<float>(seqs * ck.S * rec);
  }
  /** Checkpoint j (1 ≤ j < nchunks: the state after token j·C), tensor w, of sequence n. */
  __device__ float* checkpoint(size_t n, int j, int w) const { return saved + (n * (ck.nchunks - 1) + (j - 1)) * step + off[w]; }
  __device__ adj_t* adjoint(size_t n, int i) const { return adj + n * adj_step + adj_off[i]; }
  /** Points *p0, *p1, … at adjoints 0, 1, … of sequence n (a rule's named adjoints). */
  template <class... P>
  __device__ void bind_adjoints(size_t n, P*... p) const {
    int i = 0;
    ((*p = adjoint(n, i++)), ...);
  }
  __device__ float* sub_start(size_t n, int i, int w) const { return sub + (n * ck.nsub + i) * step + off[w]; }
  __device__ float* slot(size_t n, int i, int w) const { return buf + (n * (ck.S + 1) + i) * step + off[w]; }
  /** Record u of the replayed sub-chunk (null when the rule keeps none). */
  __device__ float* token(size_t n, int u) const { return rec == 0 ? nullptr : tok + (n * ck.S + u) * rec; }
};

/** n copies of one size: the usual description of equal state tensors or adjoints. */
template <int N>
struct Repeat {
  size_t v[N];
  __host__ __device__ explicit Repeat(size_t x) {
    for (int i = 0; i < N; i++) v[i] = x;
  }
};

/**
 * The forward of one sequence: token t goes from cur (init for t = 0) into replay slot t & 1, and the
 * state after every C-th token is copied to its checkpoint; at the end the state goes to out[w]
 * (a null out[w] is not an output: Moneta's accumulators). y of token t is Y + sq.vec(t) (no y
 * when Y is null).
 */
template <int NS, int NA, class Step>
__device__ void walk_forward(const WalkWs<NS, NA>& ws, const Seq& sq, const float* const (&init)[NS], float* const (&out)[NS], float* Y,
                             Step step) {
  const int T = static_cast<int>(sq.T);
  const float* cur[NS];
  float* next[NS];
  for (int w = 0; w < NS; w++) cur[w] = init[w];
  for (int t = 0; t < T; t++) {
    for (int w = 0; w < NS; w++) next[w] = ws.slot(sq.n, t & 1, w);
    step(t, static_cast<const float* const*>(cur), static_cast<float* const*>(next), ws.token(sq.n, 0), Y == nullptr ? nullptr : Y + sq.vec(t));
    if ((t + 1) % ws.ck.C == 0 && t + 1 < T)
      for (int w = 0; w < NS; w++) block_copy(ws.checkpoint(sq.n, (t + 1) / ws.ck.C, w), next[w], ws.size[w]);
    for (int w = 0; w < NS; w++) cur[w] = next[w];
  }
  for (int w = 0; w < NS; w++)
    if (out[w] != nullptr) block_copy(out[w], cur[w], ws.size[w]);
}

/**
 * The backward of one sequence: the chunks from last to first; per chunk its start (init for chunk 0,
 * else its checkpoint) copied to sub-chunk start 0, the other sub-chunk starts replayed from it, then
 * per sub-chunk (last first) its states replayed into slots 1..m and token(t, before, after, tok) for
 * its tokens from last to first. The replay never writes the saved region.
 */
template <int NS, int NA, class Step, class Token>
__device__ void walk_backward(const WalkWs<NS, NA>& ws, const Seq& sq, const float* const (&init)[NS], Step step, Token token) {
  const Checkpoints& ck = ws.ck;
  const size_t n = sq.n;
  const float* before[NS];
  float* after[NS];
  // the states before token t0 + u: the sub-chunk's start for u = 0, else slot u
  auto states = [&](int i, int u) {
    for (int w = 0; w < NS; w++) before[w] = u == 0 ? ws.sub_start(n, i, w) : ws.slot(n, u, w);
    for (int w = 0; w < NS; w++) after[w] = ws.slot(n, u + 1, w);
  };
  // replays the m tokens of sub-chunk i (first token t0) into slots 1..m and records 0..m−1
  auto replay = [&](int i, int t0, int m) {
    for (int u = 0; u < m; u++) {
      states(i, u);
      step(t0 + u, static_cast<const float* const*>(before), static_cast<float* const*>(after), ws.token(n, u), static_cast<float*>(nullptr));
    }
  };
  for (int j = ck.nchunks - 1; j >= 0; j--) {
    const int c0 = j * ck.C, len = ck.chunk_len(j), nsub = (len + ck.S - 1) / ck.S;
    for (int w = 0; w < NS; w++) block_copy(ws.sub_start(n, 0, w), j == 0 ? init[w] : ws.checkpoint(n, j, w), ws.size[w]);
    __syncthreads();
    for (int i = 1; i < nsub; i++) {
      replay(i - 1, c0 + (i - 1) * ck.S, ck.S);
      for (int w = 0; w < NS; w++) block_copy(ws.sub_start(n, i, w), ws.slot(n, ck.S, w), ws.size[w]);
      __syncthreads();
    }
    for (int i = nsub - 1; i >= 0; i--) {
      const int t0 = c0 + i * ck.S, m = t0 + ck.S < c0 + len ? ck.S : c0 + len - t0;
      replay(i, t0, m);
      for (int u = m - 1; u >= 0; u--) {
        states(i, u);
        token(t0 + u, static_cast<const float* const*>(before), static_cast<const float* const*>(after), ws.token(n, u));
      }
    }
  }
}

/** Starts an adjoint of n entries at the sequence's d(final state), zero when that is NULL (no barrier). */
__device__ inline void adjoint_from(adj_t* adj, const float* dFinal, const Seq& sq, size_t n) {
  const float* f = dFinal == nullptr ? nullptr : dFinal + sq.state(n);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) adj[i] = f == nullptr ? 0.0 : static_cast<adj_t>(f[i]);
}

/** Writes an adjoint (+ `extra` where given) as the sequence's f32 gradient of a state tensor (no barrier). */
__device__ inline void adjoint_out(float* out, const adj_t* adj, const adj_t* extra, const Seq& sq, size_t n) {
  float* o = out + sq.state(n);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = static_cast<float>(extra == nullptr ? adj[i] : adj[i] + extra[i]);
}

// ── the kernel pair of a rule on the walk ─────────────────────────────────────────────────

/**
 * What a rule R gives the walk's kernels and launchers (walk_forward_kernel, walk_backward_kernel,
 * walk_workspace_bytes, walk_forward_launch, walk_backward_launch):
 *   ForwardArgs, BackwardArgs, Hyper   its generated structs (gen/nlk_rules.cuh)
 *   Ws, workspace(c, shape, C, hyper)  its workspace: a WalkWs (its state tensors first, as the ABI
 *                                      lists them), carved on c, with its own scratch after it
 *   kForwardName, kBackwardName        its kernels' names in the emulation's messages
 *   threads(shape, hyper), forward_smem(shape, hyper, nt), backward_smem(shape, hyper, nt)   (host)
 *   R(a, sq, ws)                       per block, for the forward's or the backward's args: carves
 *                                      its shared memory, keeps what its step and token read
 *   step(t, cur, next, rec, y)         its step (above); token(t, before, after, rec) its token backward
 *   begin_backward(a, sq, ws)          its adjoints from d(final state) (a barrier follows)
 *   end_backward(a, sq, ws)            d(initial state) from its adjoints, after token 0
 * A rule struct derives from WalkRule<ForwardArgs, BackwardArgs>, which names the three structs and gives
 * start(init): the step state beyond the ABI's state tensors (none by default; Moneta's accumulators).
 */
template <class Fwd, class Bwd>
struct WalkRule {
  using ForwardArgs = Fwd;
  using BackwardArgs = Bwd;
  using Hyper = decltype(Fwd::hyper);
  __device__ void start(const float**) const {}
};

/**
 * What one block of a walk kernel holds: its sequence, the rule's workspace, the rule, and the step
 * state before token 0 (the ABI's initial state tensors, then the rule's own: R::start).
 */
template <class R, class A>
struct WalkBlock {
  using Ws = typename R::Ws;
  Seq sq;
  Carver c;
  const Ws ws;
  R r;
  const float* init[Ws::kStates];
  __device__ explicit WalkBlock(const A& a) : sq(a.shape, blockIdx.x), c(a.ws), ws(R::workspace(c, a.shape, a.C, a.hyper)), r(a, sq, ws) {
    for (int w = 0; w < a.state0.kCount; w++) init[w] = a.state0[w] + sq.state(ws.size[w]);
    r.start(init);
  }
};

template <class R>
__global__ void walk_forward_kernel(typename R::ForwardArgs a) {
  WalkBlock<R, typename R::ForwardArgs> k(a);
  float* out[R::Ws::kStates] = {};
  for (int w = 0; w < a.state.kCount; w++) out[w] = a.state[w] + k.sq.state(k.ws.size[w]);
  walk_forward(k.ws, k.sq, k.init, out, a.y, [&](int t, const float* const* cur, float* const* next, float* rec, float* y) { k.r.step(t, cur, next, rec, y); });
}

template <class R>
__global__ void walk_backward_kernel(typename R::BackwardArgs a) {
  WalkBlock<R, typename R::BackwardArgs> k(a);
  k.r.begin_backward(a, k.sq, k.ws);
  __syncthreads();
  walk_backward(
      k.ws, k.sq, k.init, [&](int t, const float* const* cur, float* const* next, float* rec, float* y) { k.r.step(t, cur, next, rec, y); },
      [&](int t, const float* const* before, const float* const* after, float* rec) { k.r.token(t, before, after, rec); });
  k.r.end_backward(a, k.sq, k.ws);
}

/** The launchers of a rule on the walk (the contract of gen/nlk_rules.cuh). */
template <class R>
int walk_workspace_bytes(const Shape& shape, int C, const typename R::Hyper& hyper, size_t* bytes) {
  Carver c(nullptr);
  (void)R::workspace(c, shape, C, hyper);
  *bytes = c.off;
  return NLK_OK;
}

template <class R>
int walk_forward_launch(const typename R::ForwardArgs& a) {
  const int nt = R::threads(a.shape, a.hyper);
  NLK_LAUNCH_NAMED(walk_forward_kernel<R>, R::kForwardName, a.shape.seqs(), nt, R::forward_smem(a.shape, a.hyper, nt))(a);
  return launch_status();
}

template <class R>
int walk_backward_launch(const typename R::BackwardArgs& a) {
  const int nt = R::threads(a.shape, a.hyper);
  NLK_LAUNCH_NAMED(walk_backward_kernel<R>, R::kBackwardName, a.shape.seqs(), nt, R::backward_smem(a.shape, a.hyper, nt))(a);
  return launch_status();
}

}  // namespace nlk

/**
 * The three launchers gen/nlk_rules.cuh declares for `rule`, on the walk with the rule struct `Rule`:
 * a recurrent pair's source ends with NLK_WALK_LAUNCHERS(<rule>, <Rule>) and its #include "gen/<rule>_pair.inc".
 */
#define NLK_WALK_LAUNCHERS(rule, Rule)                                                       \
  namespace nlk::rule {                                                                      \
  int workspace_bytes(const Shape& shape, int C, const Hyper& hyper, size_t* bytes) {       \
    return walk_workspace_bytes<Rule>(shape, C, hyper, bytes);                               \
  }                                                                                          \
  int forward(const ForwardArgs& a) { return walk_forward_launch<Rule>(a); }               \
  int backward(const BackwardArgs& a) { return walk_backward_launch<Rule>(a); }            \
  }
