/*
 * The 2-layer MLP memory of MONETA, YAAD and MEMORA (docs/spec/miras-compression.md#moneta, docs/spec/miras-compression.md#yaad, docs/spec/miras-compression.md#memora; reference
 * src/rules/mlp.ts), as block-cooperative device steps. State W1 [dh, d], W2 [d, dh]; per token:
 *   a = W1 k ; h = silu(a) ; e = W2 h − v ; g = φ(e) ; r = W2ᵀ g ; u = r ⊙ silu'(a)
 *   G1 = u kᵀ ; G2 = g hᵀ (never materialised) ; read: b = W1 q ; z = silu(b) ; y = W2 z
 * Every step is called by all threads of the block and ends with a barrier. Per-token vectors
 * live in shared memory (f32 where the reference stores them in the run's dtype, f64 where it
 * keeps adjoints in f64); the state adjoints are caller-owned f64 arrays in global memory.
 */
#pragma once

#include "walk.cuh"

namespace nlk {

/** The attentional bias φ of a rule, with φ'. */
struct Bias {
  enum Kind { kIdentity, kTwice, kTanh, kLpGeneral, kHuber };
  int kind;
  double p, a, delta;

  __device__ double phi(double e) const {
    switch (kind) {
      case kTwice: return 2.0 * e;
      case kTanh: return tanh(a * e);
      case kLpGeneral: return p * tanh(a * e) * pow(e * e + 1e-6, (p - 1.0) / 2.0);
      case kHuber: return fabs(e) < delta ? e : (e > 0 ? delta : e < 0 ? -delta : 0.0);
      default: return e;
    }
  }
  __device__ double dphi(double e) const {
    switch (kind) {
      case kTwice: return 2.0;
      case kTanh: {
        const double th = tanh(a * e);
        return a * (1.0 - th * th);
      }
      case kLpGeneral: {
        const double th = tanh(a * e), m = e * e + 1e-6;
        return p * (a * (1.0 - th * th) * pow(m, (p - 1.0) / 2.0) + th * (p - 1.0) * e * pow(m, (p - 3.0) / 2.0));
      }
      case kHuber: return fabs(e) < delta ? 1.0 : 0.0;
      default: return 1.0;
    }
  }
};

struct MlpSmem {
  float *k, *v, *q, *dy, *e, *g;         // [d]
  float *a, *h, *r, *u, *b, *z;          // [dh]
  acc_t *db, *p1k, *p2tg, *dH, *dr, *da;  // [dh]
  acc_t *p1tu, *p2h, *de;                 // [d]
  acc_t *red, *scal;                      // [4 nt], [8]
  __host__ __device__ MlpSmem() {}
  __host__ __device__ MlpSmem(Carver& c, int d, int dh, int nt)
      : k(c.take<float>(d)), v(c.take<float>(d)), q(c.take<float>(d)), dy(c.take<float>(d)), e(c.take<float>(d)),
        g(c.take<float>(d)), a(c.take<float>(dh)), h(c.take<float>(dh)), r(c.take<float>(dh)), u(c.take<float>(dh)),
        b(c.take<float>(dh)), z(c.take<float>(dh)), db(c.take<acc_t>(dh)), p1k(c.take<acc_t>(dh)),
        p2tg(c.take<acc_t>(dh)), dH(c.take<acc_t>(dh)), dr(c.take<acc_t>(dh)), da(c.take<acc_t>(dh)),
        p1tu(c.take<acc_t>(d)), p2h(c.take<acc_t>(d)), de(c.take<acc_t>(d)), red(c.take<acc_t>(4 * nt)),
        scal(c.take<acc_t>(8)) {}
};

/** a, h, e, g, r, u at (W1, W2) for the token in sm.k, sm.v (rounded where the reference stores). */
__device__ inline void inner_gradient(const MlpSmem& sm, int d, int dh, const float* W1, const float* W2, const Bias& bias) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int i = tid; i < dh; i += nt) {
    acc_t acc = 0;
    for (int j = 0; j < d; j++) acc += static_cast<acc_t>(W1[i * d + j]) * sm.k[j];
    sm.a[i] = static_cast<float>(acc);
    sm.h[i] = static_cast<float>(silu<acc_t>(sm.a[i]));
  }
  __syncthreads();
  for (int i = tid; i < d; i += nt) {
    acc_t acc = 0;
    for (int l = 0; l < dh; l++) acc += static_cast<acc_t>(W2[i * dh + l]) * sm.h[l];
    const float ei = static_cast<float>(static_cast<float>(acc) - static_cast<acc_t>(sm.v[i]));
    sm.e[i] = ei;
    sm.g[i] = static_cast<float>(bias.phi(ei));
  }
  __syncthreads();
  for (int l = tid; l < dh; l += nt) {
    acc_t acc = 0;
    for (int i = 0; i < d; i++) acc += static_cast<acc_t>(W2[i * dh + l]) * sm.g[i];
    sm.r[l] = static_cast<float>(acc);
    sm.u[l] = static_cast<float>(static_cast<acc_t>(sm.r[l]) * silu_prime<acc_t>(sm.a[l]));
  }
  __syncthreads();
}

/** b = W1 q, z = silu(b) for the token in sm.q; y = W2 z into y (global, [d]) unless y is null. */
__device__ inline void mlp_read(const MlpSmem& sm, int d, int dh, const float* W1, const float* W2, float* y) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int l = tid; l < dh; l += nt) {
    acc_t acc = 0;
    for (int j = 0; j < d; j++) acc += static_cast<acc_t>(W1[l * d + j]) * sm.q[j];
    sm.b[l] = static_cast<float>(acc);
    sm.z[l] = static_cast<float>(silu<acc_t>(sm.b[l]));
  }
  __syncthreads();
  if (y != nullptr) {
    for (int i = tid; i < d; i += nt) {
      acc_t acc = 0;
      for (int l = 0; l < dh; l++) acc += static_cast<acc_t>(W2[i * dh + l]) * sm.z[l];
      y[i] = static_cast<float>(acc);
    }
  }
  __syncthreads();
}

/**
 * VJP of the read at (W1, W2) with upstream sm.dy: D2 (+)= dy zᵀ, D1 (+)= δb qᵀ with
 * δb = (W2ᵀ dy) ⊙ silu'(b), and dq = W1ᵀ δb into dq (global, [d]). `accumulate` false overwrites
 * D1, D2; null D1, D2 (a frozen read) leave the state without gradient.
 */
__device__ inline void read_vjp(const MlpSmem& sm, int d, int dh, const float* W1, const float* W2, adj_t* D1, adj_t* D2,
                                bool accumulate, float* dq) {
  const int tid = threadIdx.x, nt = blockDim.x;
  mlp_read(sm, d, dh, W1, W2, nullptr);
  for (int l = tid; l < dh; l += nt) {
    acc_t dz = 0;
    for (int i = 0; i < d; i++) dz += static_cast<acc_t>(W2[i * dh + l]) * sm.dy[i];
    sm.db[l] = dz * silu_prime<acc_t>(sm.b[l]);
  }
  if (D2 != nullptr) {
    for (int idx = tid; idx < d * dh; idx += nt) {
      const adj_t add = static_cast<adj_t>(sm.dy[idx / dh]) * sm.z[idx % dh];
      D2[idx] = accumulate ? D2[idx] + add : add;
    }
  }
  __syncthreads();
  if (D1 != nullptr) {
    for (int idx = tid; idx < dh * d; idx += nt) {
      const adj_t add = sm.db[idx / d] * sm.q[idx % d];
      D1[idx] = accumulate ? D1[idx] + add : add;
    }
  }
  for (int j = tid; j < d; j += nt) {
    acc_t acc = 0;
    for (int l = 0; l < dh; l++) acc += static_cast<acc_t>(W1[l * d + j]) * sm.db[l];
    dq[j] = static_cast<float>(acc);
  }
  __syncthreads();
}

/** P1 k, P1ᵀ u, P2 h, P2ᵀ g of the adjoint pair (P1, P2), before the caller overwrites P. */
__device__ inline void chain_in(const MlpSmem& sm, int d, int dh, const adj_t* P1, const adj_t* P2) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int l = tid; l < dh; l += nt) {
    acc_t a1 = 0, a2 = 0;
    for (int j = 0; j < d; j++) a1 += P1[l * d + j] * sm.k[j];
    for (int i = 0; i < d; i++) a2 += P2[i * dh + l] * sm.g[i];
    sm.p1k[l] = a1;
    sm.p2tg[l] = a2;
  }
  for (int j = tid; j < d; j += nt) {
    acc_t a1 = 0, a2 = 0;
    for (int l = 0; l < dh; l++) a1 += P1[l * d + j] * sm.u[l];
    for (int l = 0; l < dh; l++) a2 += P2[j * dh + l] * sm.h[l];
    sm.p1tu[j] = a1;
    sm.p2h[j] = a2;
  }
  __syncthreads();
}

/** ⟨P1, G1⟩ + ⟨P2, G2⟩ = uᵀ(P1 k) + gᵀ(P2 h), after chain_in (one thread, fixed order). */
__device__ inline acc_t inner_grad_dot(const MlpSmem& sm, int d, int dh) {
  acc_t s = 0;
  for (int l = 0; l < dh; l++) s += sm.u[l] * sm.p1k[l];
  for (int i = 0; i < d; i++) s += sm.g[i] * sm.p2h[i];
  return s;
}

/**
 * The inner-gradient chain with dG1 = c P1, dG2 = c P2 (after chain_in on P), adding into the
 * adjoints D1, D2 of (W1, W2) and writing dk, dv (global, [d]); silu'' is the exact term (D2).
 */
__device__ inline void chain_out(const MlpSmem& sm, int d, int dh, acc_t c, const float* W1, const float* W2, adj_t* D1,
                                 adj_t* D2, const Bias& bias, float* dk, float* dv) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int l = tid; l < dh; l += nt) {
    const acc_t du = c * sm.p1k[l];
    sm.dH[l] = c * sm.p2tg[l];
    sm.dr[l] = du * silu_prime<acc_t>(sm.a[l]);
    sm.da[l] = du * sm.r[l] * silu_second<acc_t>(sm.a[l]);
  }
  __syncthreads();
  for (int i = tid; i < d; i += nt) {
    acc_t dg = c * sm.p2h[i];
    for (int l = 0; l < dh; l++) dg += static_cast<acc_t>(W2[i * dh + l]) * sm.dr[l];
    const acc_t dei = dg * bias.dphi(sm.e[i]);
    sm.de[i] = dei;
    dv[i] = static_cast<float>(-dei);
    for (int l = 0; l < dh; l++) D2[i * dh + l] += sm.g[i] * sm.dr[l];
    for (int l = 0; l < dh; l++) D2[i * dh + l] += dei * sm.h[l];
  }
  __syncthreads();
  for (int l = tid; l < dh; l += nt) {
    acc_t th = 0;
    for (int i = 0; i < d; i++) th += static_cast<acc_t>(W2[i * dh + l]) * sm.de[i];
    sm.da[l] += (sm.dH[l] + th) * silu_prime<acc_t>(sm.a[l]);
  }
  __syncthreads();
  for (int idx = tid; idx < dh * d; idx += nt) D1[idx] += sm.da[idx / d] * sm.k[idx % d];
  for (int j = tid; j < d; j += nt) {
    acc_t acc = c * sm.p1tu[j];
    for (int l = 0; l < dh; l++) acc += static_cast<acc_t>(W1[l * d + j]) * sm.da[l];
    dk[j] = static_cast<float>(acc);
  }
  __syncthreads();
}

/** The token's k, v, q of sequence `sq` into the shared vectors (no barrier). */
__device__ inline void load_kvq(const MlpSmem& sm, const Seq& sq, int t, const float* k, const float* v, const float* q) {
  const size_t o = sq.vec(t);
  const int d = static_cast<int>(sq.d);
  load_vec(sm.k, k + o, d);
  load_vec(sm.v, v + o, d);
  load_vec(sm.q, q + o, d);
}

/** The token's dy into sm.dy, zeros when dy is NULL (no barrier). */
__device__ inline void load_dy(const MlpSmem& sm, const Seq& sq, int t, const float* dy) {
  load_vec_or_zero(sm.dy, dy == nullptr ? nullptr : dy + sq.vec(t), static_cast<int>(sq.d));
}

/** Threads per block of an MLP kernel: its loops run over the d rows of W2 or the dh rows of W1. */
inline int mlp_threads(int d, int dh) { return threads_for(d > dh ? d : dh); }

// ── the walk (walk.cuh; docs/spec/kernel-abi.md#checkpointing) ───────────────────────────

/** The state tensors of one step (W1, W2 and, Moneta's, the accumulators A1, A2), read-only. */
struct StepIn {
  const float* const* w;
};
/** The state tensors of one step, written. */
struct StepOut {
  float* const* w;
  __device__ operator StepIn() const { return StepIn{w}; }
};

/** The workspace of an MLP rule: the walk's layout with NS state tensors and NA f64 adjoints of d·dh entries each, no token record. */
template <int NS, int NA>
struct MlpWs : WalkWs<NS, NA> {
  size_t n;
  __host__ __device__ MlpWs(Carver& c, const Shape& s, int C, int dh)
      : WalkWs<NS, NA>(c, s, C, Repeat<NS>(static_cast<size_t>(s.d) * dh).v, Repeat<NA>(static_cast<size_t>(s.d) * dh).v, 0),
        n(static_cast<size_t>(s.d) * dh) {}
};

/**
 * An MLP rule M on the walk (walk.cuh). M provides ForwardArgs, BackwardArgs, kState, kAdj,
 * Ws = MlpWs<kState, kAdj>, kForwardName, kBackwardName, a constructor M(args, sq) (carves the shared
 * memory MlpSmem), load(sq, t) (stages token t), step(sq, t, cur, next, y) (its one non-inlined step;
 * ends with a barrier), begin_backward(ws, sq, args) (its adjoints from d(final state)),
 * token_backward(sq, t, W_t, W_{t+1}), end_backward(ws, sq, args) (d(initial state)), and from
 * WalkRule its argument structs and start(init) (Moneta: A_0 = W_0). W1 and W2 are state tensors 0
 * and 1, as in the ABI.
 */
template <class M>
struct MlpWalk : M {
  using typename M::Hyper;
  using typename M::BackwardArgs;
  using typename M::Ws;
  static __host__ __device__ Ws workspace(Carver& c, const Shape& s, int C, const Hyper& h) { return Ws(c, s, C, h.d_hidden); }
  static int threads(const Shape& s, const Hyper& h) { return mlp_threads(s.d, h.d_hidden); }
  static size_t forward_smem(const Shape& s, const Hyper& h, int nt) { return layout_bytes<MlpSmem>(s.d, h.d_hidden, nt); }
  static size_t backward_smem(const Shape& s, const Hyper& h, int nt) { return forward_smem(s, h, nt); }

  Seq sq;
  template <class A>
  __device__ MlpWalk(const A& a, const Seq& s, const Ws&) : M(a, s), sq(s) {}
  __device__ void step(int t, const float* const* cur, float* const* next, float*, float* y) {
    M::load(sq, t);
    __syncthreads();
    M::step(sq, t, StepIn{cur}, StepOut{next}, y);
  }
  __device__ void begin_backward(const BackwardArgs& a, const Seq&, const Ws& ws) { M::begin_backward(ws, sq, a); }
  __device__ void token(int t, const float* const* before, const float* const* after, float*) { M::token_backward(sq, t, StepIn{before}, StepIn{after}); }
  __device__ void end_backward(const BackwardArgs& a, const Seq&, const Ws& ws) const { M::end_backward(ws, sq, a); }
};

}  // namespace nlk
