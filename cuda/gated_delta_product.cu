/*
 * Gated DeltaProduct kernel pair, ABI v2 (docs/spec/titans-family.md#gated-delta-product; reference
 * src/rules/gated_delta_product.ts; contract docs/spec/kernel-abi.md). Per token one decay, then
 * n_h Householder steps, each with its own key, value and step:
 *   P_0 = (1 − α_t) M_t ;  e_{t,j} = P_j k_{t,j} − v_{t,j} ;  P_{j+1} = P_j − θ_{t,j} e_{t,j} k_{t,j}ᵀ ;
 *   M_{t+1} = P_{n_h} ;  y_t = M_{t+1} q_t
 * k, v are [B,T,H,n_h·d] and θ [B,T,H,n_h] (kernel-abi.md#token-rows): step j of token t is the j-th
 * d of the token's row, so the token's rows start at n_h·vec(t) and its steps at n_h·gate(t).
 * Laid out as gated_delta.cu: one block per sequence (b, h), threads own rows of M and of the
 * adjoint D = ∂L/∂M_{t+1}. A step's error and update read only the thread's own row and the staged
 * k, v, so a token's n_h steps run in one row pass; with n_h = 1 every operation is Gated Delta's.
 * The per-token record is the n_h errors e_{t,j}; the backward rebuilds the states P_1 … P_{n_h−1}
 * between the steps from M_t and those errors (the forward's bits) into its own scratch.
 */
#include "matrix.cuh"

namespace {

using Fwd = nlk::gated_delta_product::ForwardArgs;
using Bwd = nlk::gated_delta_product::BackwardArgs;

/** The token's n_h rows of k and v, and q, in shared memory. */
struct FwdSmem {
  float *k, *v, *q;
  __host__ __device__ FwdSmem() {}
  __host__ __device__ FwdSmem(nlk::Carver& c, int d, int nh) : k(c.take<float>(static_cast<size_t>(nh) * d)), v(c.take<float>(static_cast<size_t>(nh) * d)), q(c.take<float>(d)) {}
};

/** The backward's: the replay's FwdSmem, then dy, q, the n_h rows of k and of e, de and the partial sums (n_h dθ rows, dα). */
struct BwdSmem {
  FwdSmem fw;
  float *dy, *q, *k, *e;
  acc_t *de, *red;
  __host__ __device__ BwdSmem() {}
  __host__ __device__ BwdSmem(nlk::Carver& c, int d, int nh, int nt)
      : fw(c, d, nh), dy(c.take<float>(d)), q(c.take<float>(d)), k(c.take<float>(static_cast<size_t>(nh) * d)),
        e(c.take<float>(static_cast<size_t>(nh) * d)), de(c.take<acc_t>(d)), red(c.take<acc_t>(static_cast<size_t>(nh + 1) * nt)) {}
};

/**
 * The walk's layout for one d×d state M with one f64 adjoint and a record of n_h·d floats (the
 * token's errors), then the backward's scratch: P_1 … P_{n_h−1} of the token being undone.
 */
struct Ws : nlk::WalkWs<1, 1> {
  size_t dd;
  int nh;
  float* pin;
  __host__ __device__ Ws(nlk::Carver& c, const nlk::Shape& s, int C, int nh_)
      : nlk::WalkWs<1, 1>(c, s, C, nlk::Repeat<1>(static_cast<size_t>(s.d) * s.d).v, nlk::Repeat<1>(static_cast<size_t>(s.d) * s.d).v,
                          static_cast<size_t>(nh_) * s.d),
        dd(static_cast<size_t>(s.d) * s.d), nh(nh_) {
    pin = c.take<float>(static_cast<size_t>(s.seqs()) * (nh_ - 1) * dd);
  }
  /** P_j (1 ≤ j < n_h) of sequence n. */
  __device__ float* inner(size_t n, int j) const { return pin + (n * (nh - 1) + (j - 1)) * dd; }
};

/**
 * One token of the forward, row by row: P_0 = (1 − α) M_cur (rounded as the reference stores it),
 * then per step e_j = P_j k_j − v_j and P_{j+1} = P_j − θ_j e_j k_jᵀ in place, and (when y is given)
 * y = M_next q. One body for the forward and the backward's replay. The caller has staged the token.
 */
NLK_NOINLINE __device__ void product_step(const float* Mcur, float* Mnext, const FwdSmem& sm, float alpha, const float* theta, int nh, int d,
                                          float* e, float* y) {
  const acc_t keep = 1.0 - static_cast<acc_t>(alpha);
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    for (int j = 0; j < d; j++) Mnext[i * d + j] = static_cast<float>(keep * Mcur[i * d + j]);
    for (int s = 0; s < nh; s++) {
      const float* k = sm.k + static_cast<size_t>(s) * d;
      acc_t pred = 0;
      for (int j = 0; j < d; j++) pred += static_cast<acc_t>(Mnext[i * d + j]) * k[j];
      const float ei = static_cast<float>(static_cast<float>(pred) - static_cast<acc_t>(sm.v[s * d + i]));
      e[s * d + i] = ei;
      const acc_t c = -static_cast<acc_t>(theta[s]) * ei;
      for (int j = 0; j < d; j++) Mnext[i * d + j] = static_cast<float>(Mnext[i * d + j] + c * k[j]);
    }
    if (y != nullptr) {
      acc_t read = 0;
      for (int j = 0; j < d; j++) read += static_cast<acc_t>(Mnext[i * d + j]) * sm.q[j];
      y[i] = static_cast<float>(read);
    }
  }
}

struct GatedDeltaProduct : nlk::WalkRule<Fwd, Bwd> {
  using Ws = ::Ws;
  static constexpr const char *kForwardName = "gated_delta_product_forward_kernel", *kBackwardName = "gated_delta_product_backward_kernel";
  static __host__ __device__ Ws workspace(nlk::Carver& c, const nlk::Shape& s, int C, const Hyper& h) { return Ws(c, s, C, h.n_h); }
  static int threads(const nlk::Shape& s, const Hyper&) { return nlk::threads_for(s.d); }
  static size_t forward_smem(const nlk::Shape& s, const Hyper& h, int) { return nlk::layout_bytes<FwdSmem>(s.d, h.n_h); }
  static size_t backward_smem(const nlk::Shape& s, const Hyper& h, int nt) { return nlk::layout_bytes<BwdSmem>(s.d, h.n_h, nt); }

  nlk::gated_delta_product::Inputs in;
  nlk::Seq sq;
  const Ws& ws;
  int nh;
  BwdSmem sm;  // the forward carves sm.fw only
  const Bwd* b = nullptr;
  adj_t* adj = nullptr;  // ∂L/∂(state after token t)

  __device__ GatedDeltaProduct(const Fwd& a, const nlk::Seq& s, const Ws& w) : in(a.in), sq(s), ws(w), nh(a.hyper.n_h) {
    sm.fw = nlk::carve_shared<FwdSmem>(a.shape.d, nh);
  }
  __device__ GatedDeltaProduct(const Bwd& a, const nlk::Seq& s, const Ws& w)
      : in(a.in), sq(s), ws(w), nh(a.hyper.n_h), sm(nlk::carve_shared<BwdSmem>(a.shape.d, a.hyper.n_h, static_cast<int>(blockDim.x))), b(&a) {}

  /** Offsets of token t's rows of k, v (and their gradients) and of its steps' θ. */
  __device__ size_t rows(int t) const { return sq.vec(t) * nh; }
  __device__ size_t steps(int t) const { return sq.gate(t) * nh; }

  /** Token t: stage its rows of k, v and q; M_cur → M_next (and y when given); barriers before and after. */
  __device__ void step(int t, const float* const* cur, float* const* next, float* e, float* y) const {
    const int d = static_cast<int>(sq.d);
    nlk::load_vec(sm.fw.k, in.k + rows(t), nh * d);
    nlk::load_vec(sm.fw.v, in.v + rows(t), nh * d);
    nlk::load_vec(sm.fw.q, in.q + sq.vec(t), d);
    __syncthreads();
    product_step(cur[0], next[0], sm.fw, in.alpha[sq.gate(t)], in.theta + steps(t), nh, d, e, y);
    __syncthreads();
  }

  __device__ void begin_backward(const Bwd& a, const nlk::Seq&, const Ws&) {
    adj = ws.adjoint(sq.n, 0);
    nlk::adjoint_from(adj, a.dstate.M, sq, ws.dd);
  }
  /** After token 0 the adjoint is ∂L/∂(initial state). */
  __device__ void end_backward(const Bwd& a, const nlk::Seq&, const Ws&) const { nlk::adjoint_out(a.dstate0.M, adj, nullptr, sq, ws.dd); }

  /**
   * Token t's backward (docs/spec/titans-family.md#gated-delta-product): Mt = M_t, Mn = M_{t+1}, rec
   * its errors. D = ∂L/∂M_{t+1} gains dy qᵀ; then for j = n_h − 1 … 0, with D = ∂L/∂P_{j+1}:
   * dθ_j = −e_jᵀ D k_j, de = −θ_j D k_j, dv_j = −de, dk_j = −θ_j Dᵀ e_j + P_jᵀ de (P_0ᵀ de as
   * (1 − α) M_tᵀ de), D += de k_jᵀ; last dα = −⟨D, M_t⟩ and D ← (1 − α) D, ∂L/∂M_t.
   */
  __device__ void token(int t, const float* const* before, const float* const* after, float* rec) const {
    const Bwd& a = *b;
    const int d = a.shape.d, tid = threadIdx.x, nt = blockDim.x;
    const float* Mt = before[0];
    const float* Mn = after[0];
    adj_t* D = adj;
    const size_t o = sq.vec(t), ro = rows(t), so = steps(t);
    nlk::load_vec_or_zero(sm.dy, a.dy == nullptr ? nullptr : a.dy + o, d);
    nlk::load_vec(sm.q, a.in.q + o, d);
    nlk::load_vec(sm.k, a.in.k + ro, nh * d);
    nlk::load_vec(sm.e, rec, nh * d);
    __syncthreads();
    const float al = a.in.alpha[sq.gate(t)];
    const adj_t keep = 1.0 - static_cast<adj_t>(al);
    // rows: the read adds dy qᵀ to D; P_1 … P_{n_h−1} rebuilt as the forward built them
    for (int i = tid; i < d; i += nt) {
      for (int j = 0; j < d; j++) D[i * d + j] += static_cast<adj_t>(sm.dy[i]) * sm.q[j];
      for (int s = 1; s < nh; s++) {
        float* P = ws.inner(sq.n, s);
        const float* k = sm.k + static_cast<size_t>(s - 1) * d;
        const acc_t c = -static_cast<acc_t>(a.in.theta[so + s - 1]) * sm.e[(s - 1) * d + i];
        for (int j = 0; j < d; j++) {
          const float prev = s == 1 ? static_cast<float>(static_cast<acc_t>(1.0 - static_cast<acc_t>(al)) * Mt[i * d + j]) : ws.inner(sq.n, s - 1)[i * d + j];
          P[i * d + j] = static_cast<float>(prev + c * k[j]);
        }
      }
    }
    __syncthreads();
    // columns: dq = M_{t+1}ᵀ dy (reads no adjoint)
    for (int j = tid; j < d; j += nt) {
      acc_t gq = 0;
      for (int i = 0; i < d; i++) gq += Mn[i * d + j] * sm.dy[i];
      a.grad.dq[o + j] = static_cast<float>(gq);
    }
    for (int s = nh - 1; s >= 0; s--) {
      const float* k = sm.k + static_cast<size_t>(s) * d;
      const float* e = sm.e + static_cast<size_t>(s) * d;
      const acc_t tht = a.in.theta[so + s];
      const size_t os = ro + static_cast<size_t>(s) * d;
      acc_t pth = 0;
      for (int i = tid; i < d; i += nt) {
        acc_t dki = 0;
        for (int j = 0; j < d; j++) dki += D[i * d + j] * k[j];
        pth += e[i] * dki;
        const acc_t dei = -tht * dki;
        sm.de[i] = dei;
        a.grad.dv[os + i] = static_cast<float>(-dei);
      }
      sm.red[s * nt + tid] = pth;
      __syncthreads();
      // columns: dk_j = −θ Dᵀ e + P_jᵀ de, P_0 = (1 − α) M_t
      const float* Pp = s == 0 ? Mt : ws.inner(sq.n, s);
      const acc_t f = s == 0 ? keep : 1.0;
      for (int j = tid; j < d; j += nt) {
        acc_t ge = 0, gm = 0;
        for (int i = 0; i < d; i++) {
          ge += D[i * d + j] * e[i];
          gm += Pp[i * d + j] * sm.de[i];
        }
        a.grad.dk[os + j] = static_cast<float>(-tht * ge + f * gm);
      }
      __syncthreads();  // every column loop has read D before it becomes ∂L/∂P_j
      if (s > 0) {
        for (int i = tid; i < d; i += nt)
          for (int j = 0; j < d; j++) D[i * d + j] += sm.de[i] * k[j];
      } else {
        // the decay: ∂L/∂P_0 = D + de k_0ᵀ ; dα = −⟨∂L/∂P_0, M_t⟩ ; ∂L/∂M_t = (1 − α) ∂L/∂P_0
        acc_t pa = 0;
        for (int i = tid; i < d; i += nt)
          for (int j = 0; j < d; j++) {
            const adj_t dt = D[i * d + j] + sm.de[i] * k[j];
            pa += dt * Mt[i * d + j];
            D[i * d + j] = keep * dt;
          }
        sm.red[nh * nt + tid] = pa;
      }
      __syncthreads();
    }
    if (tid == 0) {
      a.grad.dalpha[sq.gate(t)] = -static_cast<float>(nlk::ordered_sum(sm.red, nh));
      for (int s = 0; s < nh; s++) a.grad.dtheta[so + s] = -static_cast<float>(nlk::ordered_sum(sm.red, s));
    }
    __syncthreads();
  }
};

}  // namespace

NLK_WALK_LAUNCHERS(gated_delta_product, GatedDeltaProduct)

#include "gen/gated_delta_product_pair.inc"
