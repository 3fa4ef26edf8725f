/*
 * nlk.h — the C ABI of the nl-conformance kernel pairs (version NLK_ABI_VERSION).
 *
 * A kernel pair is a memory rule's inner recurrence: the caller computes the projections and gates
 * (k, v, q, x, alpha, theta, eta, omega) and hands them over; the forward returns y, the final state
 * and the tensors its backward needs ("saved"); the backward gets the inputs, the saved tensors and
 * dy and returns the gradient of every input the rule reads. Names and shapes follow the spec
 * README; the TypeScript reference pairs (src/rules/<rule>.ts) define the math and the saved tensors.
 *
 * Conventions
 *  - Every tensor is f32, row-major, contiguous, in host memory, batched over B independent
 *    sequences: a tensor listed below as [s,d] is passed as [B,s,d]; a state [r,c] as [B,r,c].
 *  - Every function starts with (int B, int s, int d, <the rule's hyperparameters>), then its inputs
 *    (const float*), then its outputs (float*), each in the order written here. Each rule's four
 *    functions take the same hyperparameters, even where one does not use them.
 *  - Every function returns an int status and never aborts or prints: 0 ok; > 0 a CUDA error code
 *    (e.g. 35 insufficient driver, 100 no device); < 0 an argument or emulation error (below).
 *    Outputs are unspecified when the status is not 0.
 *  - Gates: alpha, theta, eta are [s] per sequence (one scalar per token).
 *
 * Rules (inputs → outputs)
 *  delta    hyper: none
 *    forward   k,v,q [s,d], alpha,theta [s], M_0 [d,d] → y [s,d], M [d,d], mStates [s+1,d,d], e [s,d]
 *    backward  k,v,q, alpha,theta, mStates, e, dy → dk,dv,dq [s,d], dalpha,dtheta [s]
 *  titans   hyper: none
 *    forward   k,v,q, alpha,theta,eta, M_0,S_0 [d,d] → y, M, S, mStates,sStates [s+1,d,d], e [s,d]
 *    backward  k,v,q, alpha,theta,eta, mStates,sStates,e, dy → dk,dv,dq, dalpha,dtheta,deta
 *  hebbian  hyper: none
 *    forward   k,v,q, alpha, M_0 → y, M, mStates
 *    backward  k,v,q, alpha, mStates, dy → dk,dv,dq, dalpha
 *  atlas    hyper: none
 *    forward   k,v,q, alpha,theta,eta, omega [s,d], M_0,S_0 → y, M, S, mStates, sStates
 *    backward  k,v,q, alpha,theta,eta, omega, mStates,sStates, dy → dk,dq, dalpha,dtheta,deta, domega
 *  moneta   hyper: int d_hidden, double p, double q, double lambda_2, double sign_sharpness
 *    forward   k,v,q, alpha,theta, W1_0 [dh,d], W2_0 [d,dh] → y, W1, W2, w1States [s+1,dh,d],
 *              w2States [s+1,d,dh], a1States [s+1,dh,d], a2States [s+1,d,dh] (the L_q accumulators;
 *              equal to the W states when q = 2)
 *    backward  k,v,q, alpha,theta, w1States,w2States,a1States,a2States, dy → dk,dv,dq, dalpha,dtheta
 *  yaad     hyper: int d_hidden, double delta, double lambda_local, double lambda_2
 *    forward   k,v,q, alpha,theta, W1_0, W2_0 → y, W1, W2, w1States, w2States
 *    backward  k,v,q, alpha,theta, w1States,w2States, dy → dk,dv,dq, dalpha,dtheta
 *  memora   hyper: int d_hidden
 *    forward / backward: as yaad
 *  lattice  hyper: int m_slots, int variant (0 decode, 1 encode, 2 similarity)
 *    forward   k,v,q, alpha, S_0 [m,d] → y, S [m,d], sStates [s+1,m,d], readW,gamma,pDot,uNorm [s,m]
 *    backward  k,v,q, alpha, sStates,readW,gamma,pDot,uNorm, dy → dk,dv,dq, dalpha
 *  trellis  hyper: int d_compress, double lambda_k, double lambda_v     (dk = d_compress <= d)
 *    forward   k,v,q,x [s,d], alpha,theta, S_K_0 [dk,d], S_V_0 [d,dk] → y, S_K, S_V,
 *              skStates [s+1,dk,d], svStates [s+1,d,dk], r,cHat,eK,u,c [s,dk], eV [s,d]
 *    backward  k,v,q,x, alpha,theta, skStates,svStates,r,cHat,eK,u,c,eV, dy → dk,dv,dq,dx, dalpha,dtheta
 *  swa      hyper: int heads, int window   (heads divides d)
 *    forward   k,v,q → y, attnP [heads,s,window]
 *    backward  k,v,q, attnP, dy → dk,dv,dq
 *
 * Frozen reads (no swa): frozen_forward (q, <state>) → y [, saved]; frozen_backward (q, <state>
 * [, saved], dy) → dq, where <state> is M for delta/titans/hebbian/atlas, W1,W2 for
 * moneta/yaad/memora, S for lattice (saved: readW [s,m]), S_K,S_V for trellis (saved: r [s,dk]).
 */
#ifndef NLK_H
#define NLK_H

#ifdef __cplusplus
extern "C" {
#endif

#define NLK_ABI_VERSION 1

#if defined(__GNUC__)
#define NLK_API __attribute__((visibility("default")))
#else
#define NLK_API
#endif

/* Negative statuses (positive ones are CUDA's cudaError_t values). */
#define NLK_OK 0
#define NLK_ERR_NULL_POINTER (-1)      /* a required pointer is NULL */
#define NLK_ERR_BAD_SIZE (-2)          /* B, s or d < 1, or a size too large for the kernel */
#define NLK_ERR_BAD_HYPER (-3)         /* a hyperparameter outside its domain */
#define NLK_ERR_EMU_SYNC_DIVERGENT (-20) /* cpu-emu: __syncthreads() reached from different call sites */
#define NLK_ERR_EMU_SYNC_EXITED (-21)  /* cpu-emu: __syncthreads() reached after other threads returned */

/* ── identity and diagnostics ─────────────────────────────────────────────────────────── */
NLK_API int nlk_abi_version(void);
/* "cuda" or "cpu-emu" (or an external library's own name). */
NLK_API const char* nlk_backend_name(void);
/* Fills name (NUL-terminated, at most cap bytes) with the device; returns 0, or the status that every
 * kernel call would return (e.g. 35 or 100 on a machine without a usable GPU). */
NLK_API int nlk_device_info(char* name, int cap);
/* Peak memory bandwidth of the device in GB/s (0 when unknown). */
NLK_API double nlk_device_peak_gbps(void);
/* Milliseconds spent in kernels by the calling thread's last successful call (excludes copies). */
NLK_API double nlk_last_kernel_ms(void);
NLK_API const char* nlk_status_string(int status);

/* ── kernel pairs ─────────────────────────────────────────────────────────────────────── */
#define NLK_F const float*
#define NLK_O float*

NLK_API int nlk_delta_forward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta, NLK_F M_0,
                              NLK_O y, NLK_O M, NLK_O mStates, NLK_O e);
NLK_API int nlk_delta_backward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta,
                               NLK_F mStates, NLK_F e, NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq, NLK_O dalpha,
                               NLK_O dtheta);
NLK_API int nlk_delta_frozen_forward(int B, int s, int d, NLK_F q, NLK_F M, NLK_O y);
NLK_API int nlk_delta_frozen_backward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F dy, NLK_O dq);

NLK_API int nlk_titans_forward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta, NLK_F eta,
                               NLK_F M_0, NLK_F S_0, NLK_O y, NLK_O M, NLK_O S, NLK_O mStates, NLK_O sStates, NLK_O e);
NLK_API int nlk_titans_backward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta, NLK_F eta,
                                NLK_F mStates, NLK_F sStates, NLK_F e, NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq,
                                NLK_O dalpha, NLK_O dtheta, NLK_O deta);
NLK_API int nlk_titans_frozen_forward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F S, NLK_O y);
NLK_API int nlk_titans_frozen_backward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F S, NLK_F dy, NLK_O dq);

NLK_API int nlk_hebbian_forward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F M_0, NLK_O y,
                                NLK_O M, NLK_O mStates);
NLK_API int nlk_hebbian_backward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F mStates,
                                 NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq, NLK_O dalpha);
NLK_API int nlk_hebbian_frozen_forward(int B, int s, int d, NLK_F q, NLK_F M, NLK_O y);
NLK_API int nlk_hebbian_frozen_backward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F dy, NLK_O dq);

NLK_API int nlk_atlas_forward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta, NLK_F eta,
                              NLK_F omega, NLK_F M_0, NLK_F S_0, NLK_O y, NLK_O M, NLK_O S, NLK_O mStates,
                              NLK_O sStates);
NLK_API int nlk_atlas_backward(int B, int s, int d, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha, NLK_F theta, NLK_F eta,
                               NLK_F omega, NLK_F mStates, NLK_F sStates, NLK_F dy, NLK_O dk, NLK_O dq,
                               NLK_O dalpha, NLK_O dtheta, NLK_O deta, NLK_O domega);
NLK_API int nlk_atlas_frozen_forward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F S, NLK_O y);
NLK_API int nlk_atlas_frozen_backward(int B, int s, int d, NLK_F q, NLK_F M, NLK_F S, NLK_F dy, NLK_O dq);

#define NLK_MONETA_HYPER int d_hidden, double p, double q_exp, double lambda_2, double sign_sharpness
NLK_API int nlk_moneta_forward(int B, int s, int d, NLK_MONETA_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                               NLK_F theta, NLK_F W1_0, NLK_F W2_0, NLK_O y, NLK_O W1, NLK_O W2,
                               NLK_O w1States, NLK_O w2States, NLK_O a1States, NLK_O a2States);
NLK_API int nlk_moneta_backward(int B, int s, int d, NLK_MONETA_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                                NLK_F theta, NLK_F w1States, NLK_F w2States, NLK_F a1States, NLK_F a2States,
                                NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq, NLK_O dalpha, NLK_O dtheta);
NLK_API int nlk_moneta_frozen_forward(int B, int s, int d, NLK_MONETA_HYPER, NLK_F q, NLK_F W1, NLK_F W2, NLK_O y);
NLK_API int nlk_moneta_frozen_backward(int B, int s, int d, NLK_MONETA_HYPER, NLK_F q, NLK_F W1, NLK_F W2,
                                       NLK_F dy, NLK_O dq);

#define NLK_YAAD_HYPER int d_hidden, double delta, double lambda_local, double lambda_2
NLK_API int nlk_yaad_forward(int B, int s, int d, NLK_YAAD_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                             NLK_F theta, NLK_F W1_0, NLK_F W2_0, NLK_O y, NLK_O W1, NLK_O W2, NLK_O w1States,
                             NLK_O w2States);
NLK_API int nlk_yaad_backward(int B, int s, int d, NLK_YAAD_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                              NLK_F theta, NLK_F w1States, NLK_F w2States, NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq,
                              NLK_O dalpha, NLK_O dtheta);
NLK_API int nlk_yaad_frozen_forward(int B, int s, int d, NLK_YAAD_HYPER, NLK_F q, NLK_F W1, NLK_F W2, NLK_O y);
NLK_API int nlk_yaad_frozen_backward(int B, int s, int d, NLK_YAAD_HYPER, NLK_F q, NLK_F W1, NLK_F W2, NLK_F dy,
                                     NLK_O dq);

NLK_API int nlk_memora_forward(int B, int s, int d, int d_hidden, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                               NLK_F theta, NLK_F W1_0, NLK_F W2_0, NLK_O y, NLK_O W1, NLK_O W2,
                               NLK_O w1States, NLK_O w2States);
NLK_API int nlk_memora_backward(int B, int s, int d, int d_hidden, NLK_F k, NLK_F v, NLK_F q, NLK_F alpha,
                                NLK_F theta, NLK_F w1States, NLK_F w2States, NLK_F dy, NLK_O dk, NLK_O dv,
                                NLK_O dq, NLK_O dalpha, NLK_O dtheta);
NLK_API int nlk_memora_frozen_forward(int B, int s, int d, int d_hidden, NLK_F q, NLK_F W1, NLK_F W2, NLK_O y);
NLK_API int nlk_memora_frozen_backward(int B, int s, int d, int d_hidden, NLK_F q, NLK_F W1, NLK_F W2, NLK_F dy,
                                       NLK_O dq);

NLK_API int nlk_lattice_forward(int B, int s, int d, int m_slots, int variant, NLK_F k, NLK_F v, NLK_F q,
                                NLK_F alpha, NLK_F S_0, NLK_O y, NLK_O S, NLK_O sStates, NLK_O readW, NLK_O gamma,
                                NLK_O pDot, NLK_O uNorm);
NLK_API int nlk_lattice_backward(int B, int s, int d, int m_slots, int variant, NLK_F k, NLK_F v, NLK_F q,
                                 NLK_F alpha, NLK_F sStates, NLK_F readW, NLK_F gamma, NLK_F pDot, NLK_F uNorm,
                                 NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq, NLK_O dalpha);
NLK_API int nlk_lattice_frozen_forward(int B, int s, int d, int m_slots, int variant, NLK_F q, NLK_F S, NLK_O y,
                                       NLK_O readW);
NLK_API int nlk_lattice_frozen_backward(int B, int s, int d, int m_slots, int variant, NLK_F q, NLK_F S,
                                        NLK_F readW, NLK_F dy, NLK_O dq);

#define NLK_TRELLIS_HYPER int d_compress, double lambda_k, double lambda_v
NLK_API int nlk_trellis_forward(int B, int s, int d, NLK_TRELLIS_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F x,
                                NLK_F alpha, NLK_F theta, NLK_F S_K_0, NLK_F S_V_0, NLK_O y, NLK_O S_K, NLK_O S_V,
                                NLK_O skStates, NLK_O svStates, NLK_O r, NLK_O cHat, NLK_O eK, NLK_O u, NLK_O c,
                                NLK_O eV);
NLK_API int nlk_trellis_backward(int B, int s, int d, NLK_TRELLIS_HYPER, NLK_F k, NLK_F v, NLK_F q, NLK_F x,
                                 NLK_F alpha, NLK_F theta, NLK_F skStates, NLK_F svStates, NLK_F r, NLK_F cHat,
                                 NLK_F eK, NLK_F u, NLK_F c, NLK_F eV, NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq,
                                 NLK_O dx, NLK_O dalpha, NLK_O dtheta);
NLK_API int nlk_trellis_frozen_forward(int B, int s, int d, NLK_TRELLIS_HYPER, NLK_F q, NLK_F S_K, NLK_F S_V,
                                       NLK_O y, NLK_O r);
NLK_API int nlk_trellis_frozen_backward(int B, int s, int d, NLK_TRELLIS_HYPER, NLK_F q, NLK_F S_K, NLK_F S_V,
                                        NLK_F r, NLK_F dy, NLK_O dq);

NLK_API int nlk_swa_forward(int B, int s, int d, int heads, int window, NLK_F k, NLK_F v, NLK_F q, NLK_O y,
                            NLK_O attnP);
NLK_API int nlk_swa_backward(int B, int s, int d, int heads, int window, NLK_F k, NLK_F v, NLK_F q, NLK_F attnP,
                             NLK_F dy, NLK_O dk, NLK_O dv, NLK_O dq);

/* ── cpu-emu only (absent from the cuda build and from external libraries) ──────────────── */
/* Runs the threads of every block (and the blocks) in reverse order: the race check. */
NLK_API int nlk_emu_set_order(int reversed);
/* 0: fibers (default); 1: one OS thread per CUDA thread (for ThreadSanitizer). */
NLK_API int nlk_emu_set_mode(int threads);
/* 0: few threads per block (default, fast); 1: blocks sized as in the cuda build (whole warps, <= 256). */
NLK_API int nlk_emu_set_block_policy(int gpu_sized);
NLK_API int nlk_emu_workers(void);
/* What the last failed emulated launch found (e.g. the two divergent __syncthreads sites). */
NLK_API const char* nlk_emu_error_detail(void);

#undef NLK_F
#undef NLK_O

#ifdef __cplusplus
}
#endif

#endif /* NLK_H */
