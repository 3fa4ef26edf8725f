/*
 * Lattice OSR kernel pair, ABI v2 (docs/spec/miras-compression.md#lattice; reference src/rules/lattice.ts;
 * contract docs/spec/kernel-abi.md): m unit-norm slots S [m, d], READ BEFORE WRITE.
 *   READ   w = softmax(S_t q_t) ;  y_t = Σ_i w_i S_t[i]
 *   WRITE  γ_i = σ(S_t[i]·k_t) ;  u_i = v | k | v − (S_t[i]·v) S_t[i]  (decode | encode | similarity)
 *          β = α_t γ_i ;  p_i = β S_t[i]·u_i ;  ũ_i = (1 − p_i) S_t[i] + β u_i
 *          S_{t+1}[i] = ũ_i / ‖ũ_i‖ if ‖ũ_i‖ > 1e-8 else S_t[i]
 * One block per sequence (b, h). A thread owns a slot for the write and its VJP; the read and the
 * column gradients go over d. The forward keeps S every C tokens; the backward replays each chunk
 * in sub-chunks with the forward's own step (lattice_step), which also recomputes the per-token
 * scalars the VJP needs (w, γ, p, ‖ũ‖), so they and the states are the forward's bits for every C.
 */
#include "lattice.cuh"
#include "walk.cuh"

namespace {

using nlk::slots::dot_row;
using nlk::slots::kFallback;

/** The token's vectors, staged once per block: every slot reads all of them. */
struct Smem {
  float *k, *v, *q, *dy;
  __host__ __device__ Smem() {}
  __host__ __device__ Smem(nlk::Carver& c, int d) : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)), dy(c.take<float>(d)) {}
};

/** One token's per-slot scalars, as the reference stores them (f32): read weight w, γ, p, ‖ũ‖. */
struct TokScal {
  float *w, *gamma, *p, *n;
};

/** One token's record in the workspace: its scalars (m each). */
__device__ inline TokScal tok_scal(float* b, int m) { return {b, b + m, b + 2 * m, b + 3 * m}; }

/**
 * Workspace of the pair for all B·H sequences (docs/spec/kernel-abi.md#checkpointing): the walk's
 * (walk.cuh) with the m×d slot state, two f64 adjoints (∂L/∂S_{t+1} and ∂L/∂S_t, trading roles every
 * token) and a record of the per-token scalars (4 m floats); after it, per-slot f64 scratch (the
 * read's ρ, the VJP's scalars and dδ rows).
 */
struct SlotsWs : nlk::WalkWs<1, 2> {
  int m;
  size_t md;
  acc_t* rho;   // [seqs][m]        ρ = S q (forward), S·dy (backward)
  acc_t* scal;  // [seqs][4 m]      dρ, dα share, dσ chain, c2 (similarity) per slot
  acc_t* du;    // [seqs][m·d]      dδ_i β per slot: the dk / dv rows
  __host__ __device__ SlotsWs(nlk::Carver& c, const nlk::Shape& s, int C, int m_)
      : WalkWs(c, s, C, {static_cast<size_t>(m_) * s.d}, {static_cast<size_t>(m_) * s.d, static_cast<size_t>(m_) * s.d}, 4 * static_cast<size_t>(m_)),
        m(m_), md(static_cast<size_t>(m_) * s.d) {
    const size_t n = static_cast<size_t>(s.seqs());
    rho = c.take<acc_t>(n * m);
    scal = c.take<acc_t>(n * 4 * m);
    du = c.take<acc_t>(n * md);
  }
};

/** u_j of the write for slot row S; sv = S·v (similarity only). */
__device__ inline acc_t write_vec(int variant, const float* S, const Smem& sm, acc_t sv, int j) {
  if (variant == nlk::slots::kEncode) return sm.k[j];
  if (variant == nlk::slots::kDecode) return sm.v[j];
  return static_cast<acc_t>(sm.v[j]) - sv * S[j];
}

/**
 * One token of the forward (v1's arithmetic): the read at S_t (w into ts.w, and y when given), then
 * the write S_t → S_{t+1} slot by slot (γ, p, ‖ũ‖ into ts). Called by the forward and by the
 * backward's replay: one body (NLK_NOINLINE), so replayed states and scalars are bitwise the
 * forward's. The caller has staged k, v, q (barrier done) and puts a barrier after.
 */
NLK_NOINLINE __device__ void lattice_step(const float* St, float* Sn, const Smem& sm, acc_t* rho, const TokScal& ts, float alpha,
                                          int m, int d, int variant, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int i = tid; i < m; i += nt) rho[i] = dot_row(St + static_cast<size_t>(i) * d, sm.q, d);
  __syncthreads();
  if (tid == 0) nlk::slots::softmax_weights(rho, m, ts.w);
  __syncthreads();
  if (y != nullptr)
    for (int j = tid; j < d; j += nt) y[j] = nlk::slots::read_col(St, ts.w, m, d, j);
  const acc_t a = alpha;
  for (int i = tid; i < m; i += nt) {
    const float* si = St + static_cast<size_t>(i) * d;
    float* ni = Sn + static_cast<size_t>(i) * d;
    const float g = static_cast<float>(nlk::sigmoid<acc_t>(dot_row(si, sm.k, d)));
    ts.gamma[i] = g;
    const acc_t sv = variant == nlk::slots::kSimilarity ? dot_row(si, sm.v, d) : 0;
    const acc_t beta = a * g;
    acc_t su = 0;
    for (int j = 0; j < d; j++) su += static_cast<acc_t>(si[j]) * write_vec(variant, si, sm, sv, j);
    const float p = static_cast<float>(beta * su);
    ts.p[i] = p;
    acc_t nn = 0;
    for (int j = 0; j < d; j++) {
      const acc_t ut = (1.0 - static_cast<acc_t>(p)) * si[j] + beta * write_vec(variant, si, sm, sv, j);
      nn += ut * ut;
    }
    const float n = static_cast<float>(sqrt(nn));
    ts.n[i] = n;
    for (int j = 0; j < d; j++) {
      const acc_t ut = (1.0 - static_cast<acc_t>(p)) * si[j] + beta * write_vec(variant, si, sm, sv, j);
      ni[j] = n > kFallback ? static_cast<float>(ut / n) : si[j];
    }
  }
}

/** The rule's step as the walk calls it: stage k, v, q; S_t → S_{t+1}, its scalars into rec (and y when given); barriers before and after. */
__device__ void lattice_token(const nlk::lattice::Inputs& in, const nlk::lattice::Hyper& hy, const nlk::Seq& sq, const Smem& sm, const SlotsWs& ws, int t, const float* St,
                              float* Sn, float* rec, float* y) {
  const size_t o = sq.vec(t);
  const int d = static_cast<int>(sq.d);
  nlk::load_vec(sm.k, in.k + o, d);
  nlk::load_vec(sm.v, in.v + o, d);
  nlk::load_vec(sm.q, in.q + o, d);
  __syncthreads();
  lattice_step(St, Sn, sm, ws.rho + sq.n * ws.m, tok_scal(rec, ws.m), in.alpha[sq.gate(t)], hy.m_slots, d, hy.variant, y);
  __syncthreads();  // S_{t+1} and the scalars complete; the next token overwrites the shared vectors
}

/**
 * Token t's backward (v1's arithmetic, the reference's order): St = S_t, Sn = S_{t+1}, ts its scalars,
 * Sh = ∂L/∂S_{t+1}; writes P = ∂L/∂S_t and the token's dk, dv, dq, dα. Barriers before and after.
 */
__device__ void token_backward(const nlk::lattice::BackwardArgs& a, const nlk::Seq& sq, const SlotsWs& ws, const Smem& sm, const adj_t* Sh, adj_t* P,
                               const float* St, const float* Sn, const TokScal& ts, int t) {
  const int d = a.shape.d, m = a.hyper.m_slots, variant = a.hyper.variant, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  nlk::load_vec(sm.k, a.in.k + o, d);
  nlk::load_vec(sm.v, a.in.v + o, d);
  nlk::load_vec(sm.q, a.in.q + o, d);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  acc_t* dw = ws.rho + sq.n * m;
  acc_t *drho = ws.scal + sq.n * 4 * m, *da = drho + m, *dsc = drho + 2 * m, *c2 = drho + 3 * m;
  acc_t* du = ws.du + sq.n * ws.md;
  const acc_t al = a.in.alpha[sq.gate(t)];
  __syncthreads();
  // (read) dw_i = S_t[i]·dy ; dρ_i = w_i (dw_i − Σ w dw)
  for (int i = tid; i < m; i += nt) dw[i] = dot_row(St + static_cast<size_t>(i) * d, sm.dy, d);
  __syncthreads();
  if (tid == 0) {
    acc_t wdw = 0;
    for (int i = 0; i < m; i++) wdw += static_cast<acc_t>(ts.w[i]) * dw[i];
    for (int i = 0; i < m; i++) drho[i] = ts.w[i] * (dw[i] - wdw);
  }
  __syncthreads();
  for (int i = tid; i < m; i += nt) {
    const size_t r = static_cast<size_t>(i) * d;
    const float *si = St + r, *ni = Sn + r;
    const adj_t* Shi = Sh + r;
    adj_t* Pi = P + r;
    acc_t* dui = du + r;
    for (int j = 0; j < d; j++) Pi[j] = ts.w[i] * static_cast<acc_t>(sm.dy[j]) + drho[i] * sm.q[j];
    const acc_t n = ts.n[i];
    if (!(n > kFallback)) {
      // the forward copied S_t[i]: ∂L/∂S_{t+1}[i] passes straight through (D2)
      for (int j = 0; j < d; j++) {
        Pi[j] += Shi[j];
        dui[j] = 0;
      }
      da[i] = dsc[i] = c2[i] = 0;
      continue;
    }
    // dũ = (Ŝ[i] − s'(s'·Ŝ[i])) / n with s' = S_{t+1}[i], recomputed where needed
    acc_t sh = 0;
    for (int j = 0; j < d; j++) sh += static_cast<acc_t>(ni[j]) * Shi[j];
    acc_t c = 0;
    for (int j = 0; j < d; j++) c += (Shi[j] - ni[j] * sh) / n * si[j];
    const acc_t g = ts.gamma[i], p = ts.p[i], beta = al * g;
    const acc_t sv = variant == nlk::slots::kSimilarity ? dot_row(si, sm.v, d) : 0;
    acc_t ddu = 0;
    for (int j = 0; j < d; j++) {
      const acc_t dut = (Shi[j] - ni[j] * sh) / n, u = write_vec(variant, si, sm, sv, j);
      const acc_t ddelta = dut - c * si[j];
      Pi[j] += (1.0 - p) * dut - c * beta * u;
      ddu += ddelta * u;
      dui[j] = beta * ddelta;
    }
    da[i] = g * ddu;
    dsc[i] = al * ddu * g * (1.0 - g);
    acc_t cc = 0;
    if (variant == nlk::slots::kSimilarity) {
      for (int j = 0; j < d; j++) cc += dui[j] * si[j];
      for (int j = 0; j < d; j++) Pi[j] -= sv * dui[j] + cc * sm.v[j];
    }
    c2[i] = cc;
    for (int j = 0; j < d; j++) Pi[j] += dsc[i] * sm.k[j];
  }
  __syncthreads();
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gk = 0, gv = 0;
    for (int i = 0; i < m; i++) {
      const size_t e = static_cast<size_t>(i) * d + j;
      const acc_t sij = St[e], dij = du[e];
      gq += drho[i] * sij;
      if (variant == nlk::slots::kDecode) gv += dij;
      else if (variant == nlk::slots::kEncode) gk += dij;
      else gv += dij - c2[i] * sij;
      gk += dsc[i] * sij;
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    a.grad.dk[o + j] = static_cast<float>(gk);
    a.grad.dv[o + j] = static_cast<float>(gv);
  }
  if (tid == 0) {
    acc_t sa = 0;
    for (int i = 0; i < m; i++) sa += da[i];
    a.grad.dalpha[sq.gate(t)] = static_cast<float>(sa);
  }
  __syncthreads();  // every column loop has read du and the scalars before the next token rewrites them
}

/** Lattice on the walk (walk.cuh). */
struct Lattice : nlk::WalkRule<nlk::lattice::ForwardArgs, nlk::lattice::BackwardArgs> {
  using Ws = SlotsWs;
  static constexpr const char *kForwardName = "lattice_forward_kernel", *kBackwardName = "lattice_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper& h) { return Ws(c, s, C, h.m_slots); }
  static int threads(const nlk::Shape& s, const Hyper& h) { return nlk::threads_for(s.d > h.m_slots ? s.d : h.m_slots); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper&, int) { return nlk::layout_bytes<Smem>(s.d); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper& h, int nt) { return forward_smem(s, h, nt); }

  nlk::lattice::Inputs in;
  Hyper hy;
  nlk::Seq sq;
  const Ws& ws;
  Smem sm;
  const BackwardArgs* b = nullptr;
  adj_t *Sh = nullptr, *P = nullptr;  // ∂L/∂S_{t+1} (starts as d(final state)); ∂L/∂S_t, built at token t

  template <class A>
  __device__ Lattice(const A& a, const nlk::Seq& s, const Ws& w) : in(a.in), hy(a.hyper), sq(s), ws(w), sm(nlk::carve_shared<Smem>(a.shape.d)) {}
  /** The forward's scalars are scratch: the backward recomputes them. */
  __device__ void step(int t, const float* const* cur, float* const* next, float* rec, float* y) const {
    lattice_token(in, hy, sq, sm, ws, t, cur[0], next[0], rec, y);
  }
  __device__ void begin_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) {
    b = &a;
    ws.bind_adjoints(sq.n, &Sh, &P);
    nlk::adjoint_from(Sh, a.dstate.S, sq, ws.md);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* rec) {
    token_backward(*b, sq, ws, sm, Sh, P, before[0], after[0], tok_scal(rec, ws.m), t);
    nlk::swap(Sh, P);
  }
  /** After token 0's swap Sh holds ∂L/∂S_0 (S_0 is used as given, never renormalised). */
  __device__ void end_backward(const BackwardArgs& a, const nlk::Seq&, const Ws&) const { nlk::adjoint_out(a.dstate0.S, Sh, nullptr, sq, ws.md); }
};

}  // namespace

NLK_WALK_LAUNCHERS(lattice, Lattice)

#include "gen/lattice_pair.inc"
