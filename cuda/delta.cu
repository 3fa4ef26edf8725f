/*
 * Delta rule kernel pair, ABI v2 (docs/spec/titans-family.md#delta; reference src/rules/delta.ts;
 * contract docs/spec/kernel-abi.md). The template for porting a rule: see cuda/README.md.
 *   e_t = M_t k_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * One block per sequence (b, h); threads own rows of M (and of the adjoint D = ∂L/∂M_{t+1});
 * products with Mᵀ or Dᵀ are column loops that run after a barrier, when every row is final.
 * The forward keeps M every C tokens and the backward replays each chunk with the forward's own step
 * (walk.cuh: the walk's kernel pair, templated on the rule struct Delta), so its states are the
 * forward's bits for every C. What is Delta's own here: delta_step, delta_token, token_backward, and
 * the struct Delta that hands them to the walk.
 *
 * Built with -DNLK_DELTA_CHUNK_GD=G (G >= 1) the pair is chunk-start GD with chunks of G tokens
 * instead (docs/spec/chunk-forms.md#chunk-start-gd): e_t = M_c k_t − v_t with c = G·⌊t/G⌋, the
 * retention on the running M_t; it then exports nlk_delta_chunk_form (docs/spec/kernel-abi.md#chunk-form).
 */
#include "matrix.cuh"

#ifndef NLK_DELTA_CHUNK_GD
#define NLK_DELTA_CHUNK_GD 0
#endif

namespace {

/** The chunk-start GD chunk size of this build (0: the sequential rule). */
constexpr int kChunkGd = NLK_DELTA_CHUNK_GD;
static_assert(kChunkGd >= 0, "NLK_DELTA_CHUNK_GD must be >= 0");
/** kChunkGd as a divisor (only read when kChunkGd > 0). */
constexpr int kGdDiv = kChunkGd > 0 ? kChunkGd : 1;

/**
 * What chunk-start GD adds to the matrix workspace, per sequence: `lead`, saved by the forward, the
 * GD chunk start in effect at the first token of checkpoint chunk j when that token does not start
 * a GD chunk itself; `cap`, scratch, the GD chunk starts inside the checkpoint chunk being run or
 * replayed; `F`, scratch, the adjoint of the current GD chunk start. Nothing is carved when G = 0,
 * so the sequential build's workspace is unchanged.
 */
struct GdWs {
  int G, ncap, nchunks, C;
  size_t dd;
  float *lead = nullptr, *cap = nullptr;
  adj_t* F = nullptr;
  __host__ __device__ GdWs(nlk::Carver& c, const nlk::Shape& s, const nlk::Checkpoints& ck, int G_)
      : G(G_), ncap(G_ > 0 ? ck.C / G_ + 2 : 0), nchunks(ck.nchunks), C(ck.C), dd(static_cast<size_t>(s.d) * s.d) {
    if (G == 0) return;
    const size_t seqs = static_cast<size_t>(s.seqs());
    lead = c.take<float>(seqs * nchunks * dd);
    cap = c.take<float>(seqs * ncap * dd);
    F = c.take<adj_t>(seqs * dd);
  }
  /** First token of the GD chunk holding token t. */
  __device__ int start_of(int t) const { return t - t % G; }
  /** The cap slot of GD chunk start c (>= the checkpoint chunk's first token c0). */
  __device__ float* capture(size_t n, int c0, int c) const { return cap + (n * ncap + (c / G - (c0 + G - 1) / G)) * dd; }
  __device__ float* lead_of(size_t n, int j) const { return lead + (n * nchunks + j) * dd; }
  /** M_c for token t: before its checkpoint chunk (the lead) or captured inside it. */
  __device__ const float* state_for(size_t n, int t) const {
    const int c0 = t - t % C, c = start_of(t);
    return c < c0 ? lead_of(n, c0 / C) : capture(n, c0, c);
  }
  __device__ adj_t* adjoint(size_t n) const { return F + n * dd; }
};

/** At a GD chunk start, keeps the state before token t (cur) for the chunk's tokens (no barrier: the token's own follows). */
__device__ void capture_start(const GdWs& gw, size_t n, int t, const float* cur) {
  if (gw.G > 0 && t % gw.G == 0) nlk::block_copy(gw.capture(n, t - t % gw.C, t), cur, gw.dd);
}


/**
 * One token of the forward: row by row M_next = (1 − α) M_cur − θ e kᵀ, e and (when y is given)
 * y = M_next q. Called by the forward and by the backward's replay: one body (NLK_NOINLINE), so the
 * replayed states are bitwise the forward's. The caller has staged the token in sm (barrier done).
 */
NLK_NOINLINE __device__ void delta_step(const float* Mcur, const float* Mgrad, float* Mnext, const nlk::KvqSmem& sm, float alpha,
                                        float theta, int d, float* e, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha), tht = theta;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    // rounded where the reference stores: e, (1 − α)M_t, and M_{t+1}
    // the error reads Mgrad: M_t (sequential) or the GD chunk start M_c
    const float ei = nlk::error_row(Mgrad, sm, i, d);
    e[i] = ei;
    const acc_t c = -tht * ei;
    acc_t read = 0;
    for (int j = 0; j < d; j++) {
      const float m = static_cast<float>(static_cast<float>(keep * Mcur[i * d + j]) + c * sm.k[j]);
      Mnext[i * d + j] = m;
      read += static_cast<acc_t>(m) * sm.q[j];
    }
    if (y != nullptr) y[i] = static_cast<float>(read);
  }
}

/** Token t: stage k, v, q; M_cur → M_next (and y when given); barriers before and after. */
__device__ void delta_token(const nlk::delta::Inputs& in, const nlk::Seq& sq, const nlk::KvqSmem& sm, int t, const float* cur,
                            const float* grad, float* next, float* e, float* y) {
  sm.load(sq, t, in.k, in.v, in.q);
  __syncthreads();
  delta_step(cur, grad, next, sm, in.alpha[sq.gate(t)], in.theta[sq.gate(t)], static_cast<int>(sq.d), e, y);
  __syncthreads();  // M_{t+1} complete; the next token overwrites the shared vectors
}

struct BwdSmem {
  nlk::KvqSmem fw;
  nlk::ErrorBwdSmem bw;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nt) : fw(c, d), bw(c, d, nt, 2) {}
};

/**
 * Token t's backward (v1's arithmetic): Mt = M_t, Mn = M_{t+1}, e = e_t, Mc the state the error read
 * (M_t, or the GD chunk start); D carried to M_t. Chunk-start GD: the error's adjoint de kᵀ goes to F,
 * which joins D at the GD chunk's first token.
 */
__device__ void token_backward(const nlk::delta::BackwardArgs& a, const nlk::Seq& sq, const BwdSmem& sm, adj_t* D, adj_t* F, const float* Mt,
                               const float* Mc, const float* Mn, const float* e, int t) {
  const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
  const nlk::ErrorBwdSmem& b = sm.bw;
  const size_t o = sq.vec(t);
  nlk::load_vec_or_zero(b.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(b.q, a.in.q + o, d);
  nlk::load_vec(b.k, a.in.k + o, d);
  nlk::load_vec(b.e, e, d);
  __syncthreads();
  const float al = a.in.alpha[sq.gate(t)], tht = a.in.theta[sq.gate(t)];
  acc_t pa = 0, pth = 0;
  for (int i = tid; i < d; i += nt) {
    // the read y_t = M_{t+1} q_t adds dy qᵀ; then dα = −⟨D, M_t⟩, dθ = −eᵀ D k
    acc_t dki = 0;
    for (int j = 0; j < d; j++) {
      const adj_t dij = D[i * d + j] + static_cast<adj_t>(b.dy[i]) * b.q[j];
      D[i * d + j] = dij;
      pa += dij * Mt[i * d + j];
      dki += dij * b.k[j];
    }
    pth += b.e[i] * dki;
    const acc_t dei = -tht * dki;
    b.de[i] = dei;
    a.grad.dv[o + i] = static_cast<float>(-dei);
  }
  b.red[tid] = pa;
  b.red[nt + tid] = pth;
  __syncthreads();
  nlk::error_columns(a.grad, o, b, D, Mn, Mc, tht, static_cast<acc_t>(1), d);
  if (tid == 0) {
    a.grad.dalpha[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 0));
    a.grad.dtheta[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(b.red, 1));
  }
  __syncthreads();  // every column loop has read D before it is carried to M_t
  const adj_t keep = 1.0 - static_cast<adj_t>(al);
  if (kChunkGd == 0) {
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) D[i * d + j] = keep * D[i * d + j] + b.de[i] * b.k[j];
  } else {
    const bool join = t % kGdDiv == 0;
    for (int i = tid; i < d; i += nt)
      for (int j = 0; j < d; j++) {
        const size_t ij = static_cast<size_t>(i) * d + j;
        const adj_t f = F[ij] + b.de[i] * b.k[j];
        D[ij] = join ? keep * D[ij] + f : keep * D[ij];
        F[ij] = join ? 0.0 : f;
      }
  }
  __syncthreads();
}

/** Delta on the walk (walk.cuh): the workspace, the step, the token backward. */
struct Delta : nlk::WalkRule<nlk::delta::ForwardArgs, nlk::delta::BackwardArgs> {
  /** The walk's workspace, then what chunk-start GD adds (nothing in the sequential build). */
  struct Ws : nlk::MatrixWs<1> {
    GdWs gw;
    __host__ __device__ Ws(nlk::Carver& c, const nlk::Shape& s, int C) : MatrixWs(c, s, C), gw(c, s, ck, kChunkGd) {}
  };
  static constexpr const char *kForwardName = "delta_forward_kernel", *kBackwardName = "delta_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper&) { return Ws(c, s, C); }
  static int threads(const nlk::Shape& s, const Hyper&) { return nlk::threads_for(s.d); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper&, int) { return nlk::layout_bytes<nlk::KvqSmem>(s.d); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper&, int nt) { return nlk::layout_bytes<BwdSmem>(s.d, nt); }

  nlk::delta::Inputs in;
  nlk::Seq sq;
  const Ws& ws;
  BwdSmem sm;  // the forward carves sm.fw only
  bool forward;
  const BackwardArgs* b = nullptr;
  adj_t *D = nullptr, *F = nullptr;  // ∂L/∂M_{t+1}; ∂L/∂M_c through the current GD chunk's errors

  __device__ Delta(const ForwardArgs& a, const nlk::Seq& s, const Ws& w) : in(a.in), sq(s), ws(w), forward(true) {
    sm.fw = nlk::carve_shared<nlk::KvqSmem>(a.shape.d);
  }
  __device__ Delta(const BackwardArgs& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), sm(nlk::carve_shared<BwdSmem>(a.shape.d, static_cast<int>(blockDim.x))), forward(false), b(&a) {}

  /**
   * Token t from M_t into M_{t+1}, its error into e (and y when given); chunk-start GD first captures a
   * GD chunk's start M_c (scratch), and the forward saves the start in effect at a checkpoint.
   */
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    if (kChunkGd == 0) {
      delta_token(in, sq, sm.fw, t, cur[0], cur[0], next[0], e, y);
      return;
    }
    capture_start(ws.gw, sq.n, t, cur[0]);
    delta_token(in, sq, sm.fw, t, cur[0], ws.gw.state_for(sq.n, t), next[0], e, y);
    // the next checkpoint chunk starts inside this GD chunk: save its start for the backward (the replay never writes it)
    if (forward && (t + 1) % ws.ck.C == 0 && t + 1 < static_cast<int>(sq.T) && (t + 1) % kGdDiv != 0)
      nlk::block_copy(ws.gw.lead_of(sq.n, (t + 1) / ws.ck.C), ws.gw.state_for(sq.n, t), ws.dd);
  }
  __device__ void begin_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) {
    D = ws.adjoint(sq.n, 0);  // starts as d(final state)
    nlk::adjoint_from(D, a.dstate.M, sq, ws.dd);
    if (kChunkGd == 0) return;
    F = ws.gw.adjoint(sq.n);
    for (size_t i = threadIdx.x; i < ws.dd; i += blockDim.x) F[i] = 0.0;
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* e) const {
    const float* Mt = before[0];
    token_backward(*b, sq, sm, D, F, Mt, kChunkGd == 0 ? Mt : ws.gw.state_for(sq.n, t), after[0], e, t);
  }
  /** After token 0, D = ∂L/∂M_0. */
  __device__ void end_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) const { nlk::adjoint_out(a.dstate0.M, D, nullptr, sq, ws.dd); }
};

}  // namespace

NLK_WALK_LAUNCHERS(delta, Delta)

namespace nlk::delta {

#if NLK_DELTA_CHUNK_GD > 0
int chunk_form(int* kind, int* C) {
  *kind = NLK_CHUNK_START_GD;
  *C = kChunkGd;
  return NLK_OK;
}
#endif

}  // namespace nlk::delta

#include "gen/delta_pair.inc"
#if NLK_DELTA_CHUNK_GD > 0
#include "gen/delta_chunk_form.inc"
#endif
