/*
 * Trellis kernel pair, ABI v2 (docs/spec/miras-compression.md#trellis, docs/spec/decisions.md#d2;
 * reference src/rules/trellis.ts; contract docs/spec/kernel-abi.md): two-pass key/value
 * compression, READ BEFORE WRITE; x_t is the level input row itself.
 *   READ    r = S_K q ;  ĉ = nsilu(r) ;  y = S_V ĉ
 *   PASS 1  e^k = S_K x − k[0:dk] ;  S_K' = (1−α−θλ_k) S_K − θ e^k xᵀ
 *   PASS 2  u = S_K' x ;  c = nsilu(u) ;  e^v = S_V c − v ;  S_V' = (1−α−θλ_v) S_V − θ e^v cᵀ
 * nsilu(u) = √dk · silu(u)/‖silu(u)‖ (0 when ‖silu(u)‖ <= 1e-8). Threads own rows of S_K ([dk, d])
 * or of S_V ([d, dk]); the nsilu norms are taken by thread 0 (dk is small).
 * The forward keeps S_K and S_V every C tokens; the backward replays each chunk with the forward's
 * own step function (trellis_step), which also recomputes the per-token vectors r, ĉ, e^k, u, c, e^v
 * the backward reads, so neither the states nor those vectors are stored per token.
 */
#include "trellis.cuh"
#include "walk.cuh"

namespace {

/** Per-token vectors staged in shared memory, for the step and the per-token backward. */
struct Smem {
  float *q, *x, *k, *v, *dy;  // [d]
  float *r, *ch, *ek, *u, *c;  // [dk]
  float* ev;                   // [d]
  acc_t *dr, *dc, *du, *dek;   // [dk]
  acc_t *dev, *dxt;            // [d]
  acc_t* red;                  // [4 nt]
  __host__ __device__ Smem() {}
  __host__ __device__ Smem(nlk::Carver& cv, int d, int dk, int nt)
      : q(cv.take<float>(d)), x(cv.take<float>(d)), k(cv.take<float>(d)), v(cv.take<float>(d)), dy(cv.take<float>(d)),
        r(cv.take<float>(dk)), ch(cv.take<float>(dk)), ek(cv.take<float>(dk)), u(cv.take<float>(dk)),
        c(cv.take<float>(dk)), ev(cv.take<float>(d)), dr(cv.take<acc_t>(dk)), dc(cv.take<acc_t>(dk)),
        du(cv.take<acc_t>(dk)), dek(cv.take<acc_t>(dk)), dev(cv.take<acc_t>(d)), dxt(cv.take<acc_t>(d)),
        red(cv.take<acc_t>(4 * nt)) {}
  /** Token t's q, x, k, v (no barrier). */
  __device__ void load(const nlk::Seq& sq, int t, const nlk::trellis::Inputs& in) const {
    const size_t o = sq.vec(t);
    const int d = static_cast<int>(sq.d);
    nlk::load_vec(q, in.q + o, d);
    nlk::load_vec(x, in.x + o, d);
    nlk::load_vec(k, in.k + o, d);
    nlk::load_vec(v, in.v + o, d);
  }
};

/** One token's vectors as the step leaves them in the workspace: r, ĉ, e^k, u, c ([dk] each), e^v ([d]). */
struct TokVecs {
  float *r, *ch, *ek, *u, *c, *ev;
  __device__ TokVecs(float* base, int dk)
      : r(base), ch(base + dk), ek(base + 2 * dk), u(base + 3 * dk), c(base + 4 * dk), ev(base + 5 * dk) {}
};

/**
 * Workspace of the pair for all B·H sequences (docs/spec/kernel-abi.md#checkpointing): the walk's
 * (walk.cuh) with the two states S_K [dk, d] and S_V [d, dk], four f64 adjoints (Ĝ_K, Ĝ_V = ∂L/∂S^{t+1}
 * and P_K, P_V = ∂L/∂S^t) and a record of the token's vectors (TokVecs: 5 dk + d floats).
 */
struct TrellisWs : nlk::WalkWs<2, 4> {
  size_t n;  // dk·d (both states)
  __host__ __device__ TrellisWs(nlk::Carver& c, const nlk::Shape& s, int C, int dk)
      : WalkWs(c, s, C, nlk::Repeat<2>(static_cast<size_t>(dk) * s.d).v, nlk::Repeat<4>(static_cast<size_t>(dk) * s.d).v,
               5 * static_cast<size_t>(dk) + s.d),
        n(static_cast<size_t>(dk) * s.d) {}
};

/** out = nsilu(in) over n entries (one thread). */
__device__ inline void nsilu(const float* in, int n, float* out) {
  const acc_t norm = nlk::silu_norm(in, n);
  if (norm <= nlk::kNsiluEps) {
    for (int j = 0; j < n; j++) out[j] = 0.0f;
    return;
  }
  const acc_t scale = sqrt(static_cast<acc_t>(n)) / norm;
  for (int j = 0; j < n; j++) out[j] = static_cast<float>(scale * nlk::silu<acc_t>(in[j]));
}

/**
 * One row of a pass on the row Si of S_t (n columns): returns e = Si·x − target and writes the next
 * row Sni = r Si − θ e xᵀ, both rounded as the reference stores them; the read Si·a shares the sweep
 * over Si and goes to *read.
 */
__device__ inline float pass_row(const float* Si, int n, const float* a, const float* x, float target, acc_t r, acc_t th,
                                 float* Sni, acc_t* read) {
  acc_t ra = 0, ex = 0;
  for (int j = 0; j < n; j++) {
    ra += static_cast<acc_t>(Si[j]) * a[j];
    ex += static_cast<acc_t>(Si[j]) * x[j];
  }
  *read = ra;
  const float e = static_cast<float>(static_cast<float>(ex) - static_cast<acc_t>(target));
  const acc_t ce = -th * e;
  for (int j = 0; j < n; j++) Sni[j] = static_cast<float>(static_cast<float>(r * Si[j]) + ce * x[j]);
  return e;
}

/**
 * One token of the forward: the read and both passes, (S_K, S_V) → (S_K', S_V'), the token's
 * vectors into tv and (when y is given) y = S_V ĉ. Called by the forward and by the backward's
 * replay: one body (NLK_NOINLINE), so the replayed states and vectors are bitwise the forward's.
 * The caller has staged q, x, k, v in sm (barrier done) and puts a barrier after it.
 */
NLK_NOINLINE __device__ void trellis_step(const float* SKt, const float* SVt, float* SKn, float* SVn, const Smem& sm, float alpha,
                                          float theta, const nlk::trellis::Hyper& hp, int d, const TokVecs& tv, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x, dk = hp.d_compress;
  const acc_t a = alpha, th = theta;
  // READ and PASS 1 (rows of S_K): r = S_K q, e^k = S_K x − k, then the S_K update
  const acc_t rk = 1.0 - a - th * hp.lambda_k;
  for (int l = tid; l < dk; l += nt) {
    acc_t rr;
    tv.ek[l] = pass_row(SKt + l * d, d, sm.q, sm.x, sm.k[l], rk, th, SKn + l * d, &rr);
    sm.r[l] = tv.r[l] = static_cast<float>(rr);
  }
  __syncthreads();
  if (tid == 0) nsilu(sm.r, dk, sm.ch);
  // PASS 2: u = S_K' x
  for (int l = tid; l < dk; l += nt) {
    acc_t acc = 0;
    for (int j = 0; j < d; j++) acc += static_cast<acc_t>(SKn[l * d + j]) * sm.x[j];
    sm.u[l] = tv.u[l] = static_cast<float>(acc);
  }
  __syncthreads();
  if (tid == 0) nsilu(sm.u, dk, sm.c);
  __syncthreads();
  // y = S_V ĉ ; e^v = S_V c − v ; the S_V update (rows of S_V)
  const acc_t rv = 1.0 - a - th * hp.lambda_v;
  for (int i = tid; i < d; i += nt) {
    acc_t yy;
    tv.ev[i] = pass_row(SVt + i * dk, dk, sm.ch, sm.c, sm.v[i], rv, th, SVn + i * dk, &yy);
    if (y != nullptr) y[i] = static_cast<float>(yy);
  }
  for (int l = tid; l < dk; l += nt) {
    tv.ch[l] = sm.ch[l];
    tv.c[l] = sm.c[l];
  }
}

/** The rule's step as the walk calls it: stage token t, (S_K, S_V) → (S_K', S_V'), its vectors into rec (and y when given); barriers before and after. */
__device__ void trellis_token(const nlk::trellis::Inputs& in, const nlk::trellis::Hyper& hp, const nlk::Seq& sq, const Smem& sm, int t,
                              const float* const* cur, float* const* next, float* rec, float* y) {
  sm.load(sq, t, in);
  __syncthreads();
  trellis_step(cur[0], cur[1], next[0], next[1], sm, in.alpha[sq.gate(t)], in.theta[sq.gate(t)], hp, static_cast<int>(sq.d),
               TokVecs(rec, hp.d_compress), y);
  __syncthreads();  // S^{t+1} complete; the next token overwrites the shared vectors
}

/** Ĝi·x for the row Gi of an adjoint Ĝ (n columns); adds ⟨Ĝi, Si⟩, the retention's share of dα and dθ, into pg. */
__device__ inline acc_t grad_row(const adj_t* Gi, const float* Si, const float* x, int n, acc_t& pg) {
  acc_t gx = 0;
  for (int j = 0; j < n; j++) {
    gx += Gi[j] * x[j];
    pg += Gi[j] * Si[j];
  }
  return gx;
}

/**
 * Token t's backward (v1's arithmetic): SKt = S_K^t, SKn = S_K^{t+1}, SVt = S_V^t, tv its vectors.
 * GK, GV hold ∂L/∂S^{t+1} on entry; P_K, P_V (= ∂L/∂S^t) are built and the pairs swap roles.
 */
__device__ void token_backward(const nlk::trellis::BackwardArgs& a, const nlk::Seq& sq, const Smem& sm, adj_t*& GK, adj_t*& GV, adj_t*& PK,
                               adj_t*& PV, const float* SKt, const float* SKn, const float* SVt, const TokVecs& tv, int t) {
  const int d = a.shape.d, dk = a.hyper.d_compress, tid = threadIdx.x, nt = blockDim.x;
  const size_t o = sq.vec(t);
  nlk::load_vec(sm.q, a.in.q + o, d);
  nlk::load_vec(sm.x, a.in.x + o, d);
  nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
  nlk::load_vec(sm.ev, tv.ev, d);
  nlk::load_vec(sm.r, tv.r, dk);
  nlk::load_vec(sm.ch, tv.ch, dk);
  nlk::load_vec(sm.ek, tv.ek, dk);
  nlk::load_vec(sm.u, tv.u, dk);
  nlk::load_vec(sm.c, tv.c, dk);
  __syncthreads();
  const acc_t al = a.in.alpha[sq.gate(t)], th = a.in.theta[sq.gate(t)];
  const acc_t rk = 1.0 - al - th * a.hyper.lambda_k, rv = 1.0 - al - th * a.hyper.lambda_v;
  // (read) dĉ = S_Vᵀ dy (into dc for now)
  for (int l = tid; l < dk; l += nt) {
    acc_t acc = 0;
    for (int i = 0; i < d; i++) acc += static_cast<acc_t>(SVt[i * dk + l]) * sm.dy[i];
    sm.dc[l] = acc;
  }
  // (pass 2, rows of S_V) P_V = dy ĉᵀ + r_v Ĝ_V + de^v cᵀ ; de^v = −θ Ĝ_V c
  acc_t pgv = 0, pec = 0;
  for (int i = tid; i < d; i += nt) {
    const acc_t gc = grad_row(GV + static_cast<size_t>(i) * dk, SVt + static_cast<size_t>(i) * dk, sm.c, dk, pgv);
    const acc_t dev = -th * gc;
    pec += sm.ev[i] * gc;
    sm.dev[i] = dev;
    a.grad.dv[o + i] = static_cast<float>(-dev);
    for (int l = 0; l < dk; l++) {
      const size_t il = static_cast<size_t>(i) * dk + l;
      PV[il] = static_cast<adj_t>(sm.dy[i]) * sm.ch[l] + rv * GV[il] + dev * sm.c[l];
    }
  }
  sm.red[tid] = pgv;
  sm.red[nt + tid] = pec;
  __syncthreads();
  if (tid == 0) nlk::nsilu_vjp(sm.r, sm.dc, dk, sm.dr);
  // dc = −θ Ĝ_Vᵀ e^v + S_Vᵀ de^v
  for (int l = tid; l < dk; l += nt) {
    acc_t ge = 0, sv = 0;
    for (int i = 0; i < d; i++) {
      ge += GV[static_cast<size_t>(i) * dk + l] * sm.ev[i];
      sv += static_cast<acc_t>(SVt[i * dk + l]) * sm.dev[i];
    }
    sm.du[l] = -th * ge + sv;  // dc, turned into du below
  }
  __syncthreads();
  if (tid == 0) {
    for (int l = 0; l < dk; l++) sm.dc[l] = sm.du[l];
    nlk::nsilu_vjp(sm.u, sm.dc, dk, sm.du);
  }
  __syncthreads();
  // (read) P_K = dr qᵀ ; dq = S_Kᵀ dr. (pass 2) Ĝ_K += du xᵀ : pass 2 read the UPDATED S_K
  for (int l = tid; l < dk; l += nt)
    for (int j = 0; j < d; j++) {
      const size_t lj = static_cast<size_t>(l) * d + j;
      PK[lj] = sm.dr[l] * sm.q[j];
      GK[lj] += sm.du[l] * sm.x[j];
    }
  for (int j = tid; j < d; j += nt) {
    acc_t gq = 0, gx = 0;
    for (int l = 0; l < dk; l++) {
      gq += static_cast<acc_t>(SKt[l * d + j]) * sm.dr[l];
      gx += static_cast<acc_t>(SKn[l * d + j]) * sm.du[l];
    }
    a.grad.dq[o + j] = static_cast<float>(gq);
    sm.dxt[j] = gx;
  }
  __syncthreads();
  // (pass 1, rows of S_K) P_K += r_k Ĝ_K' + de^k xᵀ ; de^k = −θ Ĝ_K' x
  acc_t pgk = 0, pex = 0;
  for (int l = tid; l < dk; l += nt) {
    const acc_t gx = grad_row(GK + static_cast<size_t>(l) * d, SKt + static_cast<size_t>(l) * d, sm.x, d, pgk);
    const acc_t dek = -th * gx;
    pex += sm.ek[l] * gx;
    sm.dek[l] = dek;
    for (int j = 0; j < d; j++) {
      const size_t lj = static_cast<size_t>(l) * d + j;
      PK[lj] += rk * GK[lj] + dek * sm.x[j];
    }
  }
  sm.red[2 * nt + tid] = pgk;
  sm.red[3 * nt + tid] = pex;
  __syncthreads();
  // dk: only k[0:dk] enters e^k ; dx: x_t enters e^k = S_K x − k and the outer product e^k xᵀ
  for (int j = tid; j < d; j += nt) {
    a.grad.dk[o + j] = j < dk ? static_cast<float>(-sm.dek[j]) : 0.0f;
    acc_t sx = 0, ge = 0;
    for (int l = 0; l < dk; l++) {
      sx += static_cast<acc_t>(SKt[l * d + j]) * sm.dek[l];
      ge += GK[static_cast<size_t>(l) * d + j] * sm.ek[l];
    }
    a.grad.dx[o + j] = static_cast<float>(sm.dxt[j] + sx - th * ge);
  }
  if (tid == 0) {
    const acc_t gvS = nlk::ordered_sum(sm.red, 0), egc = nlk::ordered_sum(sm.red, 1);
    const acc_t gkS = nlk::ordered_sum(sm.red, 2), egx = nlk::ordered_sum(sm.red, 3);
    a.grad.dalpha[sq.gate(t)] = static_cast<float>(-gvS - gkS);
    a.grad.dtheta[sq.gate(t)] = static_cast<float>(-egc - a.hyper.lambda_v * gvS - egx - a.hyper.lambda_k * gkS);
  }
  __syncthreads();  // every column loop has read Ĝ before P becomes the next token's Ĝ
  nlk::swap(GK, PK);
  nlk::swap(GV, PV);
}

/** Trellis on the walk (walk.cuh). */
struct Trellis : nlk::WalkRule<nlk::trellis::ForwardArgs, nlk::trellis::BackwardArgs> {
  using Ws = TrellisWs;
  static constexpr const char *kForwardName = "trellis_forward_kernel", *kBackwardName = "trellis_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper& h) { return Ws(c, s, C, h.d_compress); }
  static int threads(const nlk::Shape& s, const Hyper&) { return nlk::threads_for(s.d); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper& h, int nt) { return nlk::layout_bytes<Smem>(s.d, h.d_compress, nt); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper& h, int nt) { return forward_smem(s, h, nt); }

  nlk::trellis::Inputs in;
  Hyper hp;
  nlk::Seq sq;
  Smem sm;
  const BackwardArgs* b = nullptr;
  adj_t *GK = nullptr, *GV = nullptr, *PK = nullptr, *PV = nullptr;  // Ĝ = ∂L/∂S^{t+1} (starts as d(final state)); P = ∂L/∂S^t

  template <class A>
  __device__ Trellis(const A& a, const nlk::Seq& s, const Ws&)
      : in(a.in), hp(a.hyper), sq(s), sm(nlk::carve_shared<Smem>(a.shape.d, a.hyper.d_compress, static_cast<int>(blockDim.x))) {}
  /** The forward's vectors are scratch: the backward recomputes them. */
  __device__ void step(int t, const float* const* cur, float* const* next, float* rec, float* y) const {
    trellis_token(in, hp, sq, sm, t, cur, next, rec, y);
  }
  __device__ void begin_backward(const BackwardArgs& a, const nlk::Seq&, const Ws& ws) {
    b = &a;
    ws.bind_adjoints(sq.n, &GK, &GV, &PK, &PV);
    nlk::adjoint_from(GK, a.dstate.S_K, sq, ws.n);
    nlk::adjoint_from(GV, a.dstate.S_V, sq, ws.n);
  }
  __device__ void token(int t, const float* const* before, const float* const* after, float* rec) {
    token_backward(*b, sq, sm, GK, GV, PK, PV, before[0], after[0], before[1], TokVecs(rec, hp.d_compress), t);
  }
  /** After token 0's swap Ĝ holds ∂L/∂S^0. */
  __device__ void end_backward(const BackwardArgs& a, const nlk::Seq&, const Ws& ws) const {
    nlk::adjoint_out(a.dstate0.S_K, GK, nullptr, sq, ws.n);
    nlk::adjoint_out(a.dstate0.S_V, GV, nullptr, sq, ws.n);
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(trellis, Trellis)

#include "gen/trellis_pair.inc"
