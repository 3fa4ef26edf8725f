/*
 * Trellis kernel pair (docs/spec/miras-compression.md#trellis, docs/spec/decisions.md#d2; reference src/rules/trellis.ts): two-pass
 * key/value compression, READ BEFORE WRITE; x_t is the level input row itself.
 *   READ    r = S_K q ;  ĉ = nsilu(r) ;  y = S_V ĉ
 *   PASS 1  e^k = S_K x − k[0:dk] ;  S_K' = (1−α−θλ_k) S_K − θ e^k xᵀ
 *   PASS 2  u = S_K' x ;  c = nsilu(u) ;  e^v = S_V c − v ;  S_V' = (1−α−θλ_v) S_V − θ e^v cᵀ
 * nsilu(u) = √dk · silu(u)/‖silu(u)‖ (0 when ‖silu(u)‖ <= 1e-8). Threads own rows of S_K ([dk, d])
 * or of S_V ([d, dk]); the nsilu norms are taken by thread 0 (dk is small).
 */
#include "trellis.cuh"

namespace {

struct Smem {
  float *q, *x, *k, *v, *dy;  // [d]
  float *r, *ch, *ek, *u, *c;  // [dk]
  float* ev;                   // [d]
  acc_t *dr, *dc, *du, *dek;   // [dk]
  acc_t *dev, *dxt;            // [d]
  acc_t* red;                  // [4 nt]
  __host__ __device__ Smem(nlk::Carver& cv, int d, int dk, int nt)
      : q(cv.take<float>(d)), x(cv.take<float>(d)), k(cv.take<float>(d)), v(cv.take<float>(d)), dy(cv.take<float>(d)),
        r(cv.take<float>(dk)), ch(cv.take<float>(dk)), ek(cv.take<float>(dk)), u(cv.take<float>(dk)),
        c(cv.take<float>(dk)), ev(cv.take<float>(d)), dr(cv.take<acc_t>(dk)), dc(cv.take<acc_t>(dk)),
        du(cv.take<acc_t>(dk)), dek(cv.take<acc_t>(dk)), dev(cv.take<acc_t>(d)), dxt(cv.take<acc_t>(d)),
        red(cv.take<acc_t>(4 * nt)) {}
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

/** out = VJP of nsilu at u for upstream g (one thread); 0 below the norm guard. */
__device__ inline void nsilu_vjp(const float* u, const acc_t* g, int n, acc_t* out) {
  const acc_t norm = nlk::silu_norm(u, n);
  if (norm <= nlk::kNsiluEps) {
    for (int j = 0; j < n; j++) out[j] = 0;
    return;
  }
  nlk::nsilu_vjp_at(u, g, n, norm, out);
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

/** Ĝi·x for the row Gi of an adjoint Ĝ (n columns); adds ⟨Ĝi, Si⟩, the retention's share of dα and dθ, into pg. */
__device__ inline acc_t grad_row(const adj_t* Gi, const float* Si, const float* x, int n, acc_t& pg) {
  acc_t gx = 0;
  for (int j = 0; j < n; j++) {
    gx += Gi[j] * x[j];
    pg += Gi[j] * Si[j];
  }
  return gx;
}

struct Hyper {
  int dk;
  double lk, lv;
};

__global__ void trellis_forward_kernel(int s, int d, Hyper hp, const float* __restrict__ K, const float* __restrict__ V,
                                       const float* __restrict__ Q, const float* __restrict__ X,
                                       const float* __restrict__ alpha, const float* __restrict__ theta,
                                       const float* __restrict__ SK0, const float* __restrict__ SV0, float* __restrict__ Y,
                                       float* __restrict__ SKout, float* __restrict__ SVout, float* __restrict__ skStates,
                                       float* __restrict__ svStates, float* __restrict__ R, float* __restrict__ CH,
                                       float* __restrict__ EK, float* __restrict__ U, float* __restrict__ C,
                                       float* __restrict__ EV) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dk = hp.dk;
  const auto sm = nlk::carve_shared<Smem>(d, dk, nt);
  const size_t n = static_cast<size_t>(dk) * d, sd = static_cast<size_t>(s) * d, sk = static_cast<size_t>(s) * dk;
  float *SK = nlk::start_states(skStates, SK0, b, s, n), *SV = nlk::start_states(svStates, SV0, b, s, n);
  for (int t = 0; t < s; t++) {
    const size_t o = b * sd + static_cast<size_t>(t) * d, oc = b * sk + static_cast<size_t>(t) * dk;
    nlk::load_vec(sm.q, Q + o, d);
    nlk::load_vec(sm.x, X + o, d);
    nlk::load_vec(sm.k, K + o, d);
    nlk::load_vec(sm.v, V + o, d);
    __syncthreads();
    const acc_t a = alpha[static_cast<size_t>(b) * s + t], th = theta[static_cast<size_t>(b) * s + t];
    const float *SKt = SK + t * n, *SVt = SV + t * n;
    float *SKn = SK + (t + 1) * n, *SVn = SV + (t + 1) * n;
    // READ and PASS 1 (rows of S_K): r = S_K q, e^k = S_K x − k, then the S_K update
    const acc_t rk = 1.0 - a - th * hp.lk;
    for (int l = tid; l < dk; l += nt) {
      acc_t rr;
      sm.ek[l] = EK[oc + l] = pass_row(SKt + l * d, d, sm.q, sm.x, sm.k[l], rk, th, SKn + l * d, &rr);
      sm.r[l] = R[oc + l] = static_cast<float>(rr);
    }
    __syncthreads();
    if (tid == 0) nsilu(sm.r, dk, sm.ch);
    // PASS 2: u = S_K' x
    for (int l = tid; l < dk; l += nt) {
      acc_t acc = 0;
      for (int j = 0; j < d; j++) acc += static_cast<acc_t>(SKn[l * d + j]) * sm.x[j];
      sm.u[l] = U[oc + l] = static_cast<float>(acc);
    }
    __syncthreads();
    if (tid == 0) nsilu(sm.u, dk, sm.c);
    __syncthreads();
    // y = S_V ĉ ; e^v = S_V c − v ; the S_V update (rows of S_V)
    const acc_t rv = 1.0 - a - th * hp.lv;
    for (int i = tid; i < d; i += nt) {
      acc_t yy;
      EV[o + i] = pass_row(SVt + i * dk, dk, sm.ch, sm.c, sm.v[i], rv, th, SVn + i * dk, &yy);
      Y[o + i] = static_cast<float>(yy);
    }
    for (int l = tid; l < dk; l += nt) {
      CH[oc + l] = sm.ch[l];
      C[oc + l] = sm.c[l];
    }
    __syncthreads();
  }
  nlk::store_final_state(SKout, SK, b, s, n);
  nlk::store_final_state(SVout, SV, b, s, n);
}

__global__ void trellis_backward_kernel(int s, int d, Hyper hp, const float* __restrict__ Q, const float* __restrict__ X,
                                        const float* __restrict__ alpha, const float* __restrict__ theta,
                                        const float* __restrict__ skStates, const float* __restrict__ svStates,
                                        const float* __restrict__ R, const float* __restrict__ CH,
                                        const float* __restrict__ EK, const float* __restrict__ U,
                                        const float* __restrict__ C, const float* __restrict__ EV,
                                        const float* __restrict__ DY, float* __restrict__ DK, float* __restrict__ DV,
                                        float* __restrict__ DQ, float* __restrict__ DX, float* __restrict__ dalpha,
                                        float* __restrict__ dtheta, adj_t* __restrict__ scratch) {
  const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x, dk = hp.dk;
  const auto sm = nlk::carve_shared<Smem>(d, dk, nt);
  const size_t n = static_cast<size_t>(dk) * d, sd = static_cast<size_t>(s) * d, sk = static_cast<size_t>(s) * dk;
  const float *SK = nlk::seq_states(skStates, b, s, n), *SV = nlk::seq_states(svStates, b, s, n);
  // Ĝ = ∂L/∂S^{t+1} from later tokens; P = ∂L/∂S^t being built at token t
  adj_t* base = scratch + b * 4 * n;
  adj_t *GK = base, *GV = GK + n, *PK = GV + n, *PV = PK + n;
  for (int t = s - 1; t >= 0; t--) {
    const size_t o = b * sd + static_cast<size_t>(t) * d, oc = b * sk + static_cast<size_t>(t) * dk;
    nlk::load_vec(sm.q, Q + o, d);
    nlk::load_vec(sm.x, X + o, d);
    nlk::load_vec(sm.dy, DY + o, d);
    nlk::load_vec(sm.ev, EV + o, d);
    nlk::load_vec(sm.r, R + oc, dk);
    nlk::load_vec(sm.ch, CH + oc, dk);
    nlk::load_vec(sm.ek, EK + oc, dk);
    nlk::load_vec(sm.u, U + oc, dk);
    nlk::load_vec(sm.c, C + oc, dk);
    __syncthreads();
    const acc_t a = alpha[static_cast<size_t>(b) * s + t], th = theta[static_cast<size_t>(b) * s + t];
    const acc_t rk = 1.0 - a - th * hp.lk, rv = 1.0 - a - th * hp.lv;
    const float *SKt = SK + t * n, *SKn = SK + (t + 1) * n, *SVt = SV + t * n;
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
      DV[o + i] = static_cast<float>(-dev);
      for (int l = 0; l < dk; l++) {
        const size_t il = static_cast<size_t>(i) * dk + l;
        PV[il] = static_cast<adj_t>(sm.dy[i]) * sm.ch[l] + rv * GV[il] + dev * sm.c[l];
      }
    }
    sm.red[tid] = pgv;
    sm.red[nt + tid] = pec;
    __syncthreads();
    if (tid == 0) nsilu_vjp(sm.r, sm.dc, dk, sm.dr);
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
      nsilu_vjp(sm.u, sm.dc, dk, sm.du);
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
      DQ[o + j] = static_cast<float>(gq);
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
      DK[o + j] = j < dk ? static_cast<float>(-sm.dek[j]) : 0.0f;
      acc_t sx = 0, ge = 0;
      for (int l = 0; l < dk; l++) {
        sx += static_cast<acc_t>(SKt[l * d + j]) * sm.dek[l];
        ge += GK[static_cast<size_t>(l) * d + j] * sm.ek[l];
      }
      DX[o + j] = static_cast<float>(sm.dxt[j] + sx - th * ge);
    }
    if (tid == 0) {
      const acc_t gvS = nlk::ordered_sum(sm.red, 0), egc = nlk::ordered_sum(sm.red, 1);
      const acc_t gkS = nlk::ordered_sum(sm.red, 2), egx = nlk::ordered_sum(sm.red, 3);
      dalpha[static_cast<size_t>(b) * s + t] = static_cast<float>(-gvS - gkS);
      dtheta[static_cast<size_t>(b) * s + t] = static_cast<float>(-egc - hp.lv * gvS - egx - hp.lk * gkS);
    }
    __syncthreads();
    nlk::swap(GK, PK);
    nlk::swap(GV, PV);
  }
}

int check_hyper(int d, int dk, double lk, double lv) {
  if (dk < 1 || dk > d) return NLK_ERR_BAD_SIZE;
  if (!(lk >= 0.0) || !(lv >= 0.0)) return NLK_ERR_BAD_HYPER;
  return 0;
}

}  // namespace

extern "C" {

NLK_API int nlk_trellis_forward(int B, int s, int d, int d_compress, double lambda_k, double lambda_v, const float* k,
                                const float* v, const float* q, const float* x, const float* alpha, const float* theta,
                                const float* S_K_0, const float* S_V_0, float* y, float* S_K, float* S_V,
                                float* skStates, float* svStates, float* r, float* cHat, float* eK, float* u, float* c,
                                float* eV) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d, d_compress, lambda_k, lambda_v)) return st;
  NLK_REQUIRE_PTRS(k, v, q, x, alpha, theta, S_K_0, S_V_0, y, S_K, S_V, skStates, svStates, r, cHat, eK, u, c, eV);
  const Hyper hp{d_compress, lambda_k, lambda_v};
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s, n = static_cast<size_t>(B) * d_compress * d;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d_compress * d, sk = static_cast<size_t>(B) * s * d_compress;
  nlk::Call call;
  const float *gk = call.in(k, sd), *gv = call.in(v, sd), *gq = call.in(q, sd), *gx = call.in(x, sd),
              *ga = call.in(alpha, g), *gt = call.in(theta, g), *gk0 = call.in(S_K_0, n), *gv0 = call.in(S_V_0, n);
  float *oy = call.out(y, sd), *oK = call.out(S_K, n), *oV = call.out(S_V, n), *osk = call.out(skStates, ns),
        *osv = call.out(svStates, ns), *or_ = call.out(r, sk), *och = call.out(cHat, sk), *oek = call.out(eK, sk),
        *ou = call.out(u, sk), *oc = call.out(c, sk), *oev = call.out(eV, sd);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<Smem>(d, d_compress, nt);
  call.start();
  NLK_LAUNCH(trellis_forward_kernel, B, nt, smem)(s, d, hp, gk, gv, gq, gx, ga, gt, gk0, gv0, oy, oK, oV, osk, osv, or_,
                                                    och, oek, ou, oc, oev);
  return call.finish();
}

NLK_API int nlk_trellis_backward(int B, int s, int d, int d_compress, double lambda_k, double lambda_v, const float* k,
                                 const float* v, const float* q, const float* x, const float* alpha, const float* theta,
                                 const float* skStates, const float* svStates, const float* r, const float* cHat,
                                 const float* eK, const float* u, const float* c, const float* eV, const float* dy,
                                 float* dk, float* dv, float* dq, float* dx, float* dalpha, float* dtheta) {
  NLK_REQUIRE_DIMS(B, s, d);
  if (int st = check_hyper(d, d_compress, lambda_k, lambda_v)) return st;
  NLK_REQUIRE_PTRS(k, v, q, x, alpha, theta, skStates, svStates, r, cHat, eK, u, c, eV, dy, dk, dv, dq, dx, dalpha, dtheta);
  const Hyper hp{d_compress, lambda_k, lambda_v};
  const size_t sd = static_cast<size_t>(B) * s * d, g = static_cast<size_t>(B) * s;
  const size_t ns = static_cast<size_t>(B) * (s + 1) * d_compress * d, sk = static_cast<size_t>(B) * s * d_compress;
  nlk::Call call;
  const float *gq = call.in(q, sd), *gx = call.in(x, sd), *ga = call.in(alpha, g), *gt = call.in(theta, g),
              *gsk = call.in(skStates, ns), *gsv = call.in(svStates, ns), *gr = call.in(r, sk), *gch = call.in(cHat, sk),
              *gek = call.in(eK, sk), *gu = call.in(u, sk), *gc = call.in(c, sk), *gev = call.in(eV, sd),
              *gdy = call.in(dy, sd);
  float *odk = call.out(dk, sd), *odv = call.out(dv, sd), *odq = call.out(dq, sd), *odx = call.out(dx, sd),
        *oda = call.out(dalpha, g), *odt = call.out(dtheta, g);
  adj_t* scratch = call.scratch<adj_t>(static_cast<size_t>(B) * 4 * d_compress * d);
  if (call.status() != 0) return call.finish();
  const int nt = nlk::threads_for(d);
  const size_t smem = nlk::smem_bytes<Smem>(d, d_compress, nt);
  call.start();
  NLK_LAUNCH(trellis_backward_kernel, B, nt, smem)(s, d, hp, gq, gx, ga, gt, gsk, gsv, gr, gch, gek, gu, gc, gev, gdy, odk,
                                                     odv, odq, odx, oda, odt, scratch);
  return call.finish();
}

}  // extern "C"
