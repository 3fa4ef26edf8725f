/*
 * nlk.h — the C ABI of the nl-conformance kernel pairs, version NLK_ABI_VERSION (2).
 * The full contract, with its reasons, is docs/spec/kernel-abi.md; this is the summary.
 *
 * A kernel pair is a memory rule's inner recurrence. The caller computes projections and gates and
 * hands over per-token k, v, q (and x, alpha, theta, eta, omega where the rule reads them) and the
 * initial state; the forward writes y, the final state and its own workspace; the backward reads
 * the inputs, the initial state and the workspace, takes dy and d(final state), and writes the
 * gradient of every input and of the initial state.
 *
 * Shapes (row-major, contiguous, f32 unless nlk_dtypes says otherwise):
 *   per-token tensors (k, v, q, x, omega, y and their gradients)  [B, T, H, d]   (d per head)
 *   gates (alpha, theta, eta and their gradients)                 [B, T, H]
 *   states (e.g. M [d,d]; W1 [dh,d])                              [B, H, r, c]
 * Every (b, h) is an independent sequence; H = 1 is the single-head math of the reference.
 *
 * Memory: every pointer is memory of this library (nlk_alloc: device memory in a CUDA build,
 * host memory in a CPU build). A kernel call moves no data between host and device.
 *
 * Workspace: nlk_<rule>_workspace_bytes(shape, C, hyper, &bytes) says how many bytes the forward
 * needs; the caller allocates them and passes the same pointer to the backward. Its contents are
 * the library's own (the caller never reads them). The backward must not change what the forward
 * saved: a second backward on the same workspace gives the same result.
 *
 * Checkpoint interval C (recurrent pairs): the forward keeps the state every C tokens and the
 * backward recomputes the states inside a chunk; C = 1 keeps every state. y and the final state
 * are bitwise identical for every C. A library that does not support some C returns
 * NLK_ERR_UNSUPPORTED.
 *
 * NULL: dy and every d<state> argument of a backward may be NULL, meaning zero. Every other
 * pointer is required (the workspace may be NULL only when its size is 0).
 *
 * Argument order: (B, T, H, d[, C], <hyperparameters in declaration order>, <inputs>, <outputs>),
 * exactly as the generated prototypes below. Enum hyperparameters are passed as the index of the
 * value. Every function returns a status and never aborts or prints: 0 ok; > 0 a CUDA error code;
 * < 0 the NLK_ERR_* below. Outputs are unspecified when the status is not 0. Every call has
 * finished (synchronised) when it returns.
 */
#ifndef NLK_H
#define NLK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NLK_ABI_VERSION 2

#if defined(__GNUC__)
#define NLK_API __attribute__((visibility("default")))
#else
#define NLK_API
#endif

/* Negative statuses (positive ones are CUDA's cudaError_t values). */
#define NLK_OK 0
#define NLK_ERR_NULL_POINTER (-1)      /* a required pointer is NULL */
#define NLK_ERR_BAD_SIZE (-2)          /* B, T, H, d or C < 1, or a size too large for the kernel */
#define NLK_ERR_BAD_HYPER (-3)         /* a hyperparameter outside its domain */
#define NLK_ERR_UNSUPPORTED (-4)       /* valid, but not implemented by this library (e.g. this C) */
#define NLK_ERR_EMU_SYNC_DIVERGENT (-20) /* cpu-emu: __syncthreads() reached from different call sites */
#define NLK_ERR_EMU_SYNC_EXITED (-21)  /* cpu-emu: __syncthreads() reached after other threads returned */

/* dtype codes of nlk_dtypes. */
#define NLK_DTYPE_F32 1
#define NLK_DTYPE_BF16 2
#define NLK_DTYPE_F16 3
#define NLK_DTYPE_F64 4

/* ── identity and diagnostics ─────────────────────────────────────────────────────────── */
NLK_API int nlk_abi_version(void);
/* "cuda" or "cpu-emu" (or an external library's own name). */
NLK_API const char* nlk_backend_name(void);
/* Fills name (NUL-terminated, at most cap bytes) with the device; returns 0, or the status that every
 * kernel call would return (e.g. 35 or 100 on a machine without a usable GPU). */
NLK_API int nlk_device_info(char* name, int cap);
/* Peak memory bandwidth of the device in GB/s (0 when unknown). */
NLK_API double nlk_device_peak_gbps(void);
/* Milliseconds spent in kernels by the calling thread's last successful call (CUDA events on a GPU). */
NLK_API double nlk_last_kernel_ms(void);
NLK_API const char* nlk_status_string(int status);
/* The storage (tensors crossing the ABI), state and accumulate dtypes of the function named fn
 * (e.g. "nlk_delta_forward"); NLK_ERR_UNSUPPORTED when the library does not export it. */
NLK_API int nlk_dtypes(const char* fn, int* storage, int* state, int* accumulate);

/* ── memory ───────────────────────────────────────────────────────────────────────────── */
NLK_API int nlk_alloc(size_t bytes, void** out);
NLK_API int nlk_free(void* p);
NLK_API int nlk_copy_in(void* dst, const void* host_src, size_t bytes);
NLK_API int nlk_copy_out(void* host_dst, const void* src, size_t bytes);
NLK_API int nlk_synchronize(void);

/* Chunk forms a pair may declare through its optional nlk_<rule>_chunk_form(int* kind, int* C)
 * (docs/spec/kernel-abi.md#chunk-form). A library that does not export it is sequential. */
#define NLK_CHUNK_SEQUENTIAL 0  /* the sequential rule (C unused) */
#define NLK_CHUNK_EXACT 1       /* an exact chunked form with chunks of C tokens: the sequential rule's function */
#define NLK_CHUNK_START_GD 2    /* chunk-start GD with chunks of C tokens: each inner gradient at its chunk's start state */

/* Variants a pair can run in (docs/spec/kernel-abi.md#variants), through two optional functions per pair:
 *   int nlk_<rule>_variants(int index, char* name, int cap);  the count; writes variant index's name (NUL-terminated, at most cap bytes)
 *   int nlk_<rule>_set_variant(int index);                    pins variant index for later calls (-1: the library's own choice); NLK_OK or an error
 * C5 judges forward and backward under the library's own choice and under each variant pinned. A library that
 * exports neither is judged under its own dispatch only; one of the two without the other fails. */

/* ── kernel pairs and frozen reads ─────────────────────────────────────────────────────── */
/* ── BEGIN GENERATED by ffi/generate.ts from the rule declarations: do not edit ── */
/* delta: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_delta_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_delta_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_delta_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_delta_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_delta_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_delta_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_delta_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* titans: inputs k, v, q, alpha, theta, eta; gradients dk, dv, dq, dalpha, dtheta, deta; state M, S; hyper none */
NLK_API int nlk_titans_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_titans_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* M_0, const float* S_0, float* y,
    float* M, float* S, void* workspace);
NLK_API int nlk_titans_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* M_0, const float* S_0,
    const float* dy, const float* dM, const float* dS, void* workspace, float* dk, float* dv, float* dq,
    float* dalpha, float* dtheta, float* deta, float* dM_0, float* dS_0);
NLK_API int nlk_titans_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_titans_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, const float* S,
    float* y, void* workspace);
NLK_API int nlk_titans_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* S,
    const float* dy, void* workspace, float* dq, float* dM, float* dS);
NLK_API int nlk_titans_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* hebbian: inputs k, v, q, alpha; gradients dk, dv, dq, dalpha; state M; hyper none */
NLK_API int nlk_hebbian_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_hebbian_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_hebbian_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* M_0, const float* dy, const float* dM, void* workspace, float* dk,
    float* dv, float* dq, float* dalpha, float* dM_0);
NLK_API int nlk_hebbian_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_hebbian_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_hebbian_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_hebbian_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* moneta: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state W1, W2; hyper int d_hidden, double p, double q, double lambda_2, double sign_sharpness */
NLK_API int nlk_moneta_workspace_bytes(int B, int T, int H, int d, int C, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, size_t* bytes);
NLK_API int nlk_moneta_forward(int B, int T, int H, int d, int C, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, const float* k, const float* v, const float* q, const float* alpha,
    const float* theta, const float* W1_0, const float* W2_0, float* y, float* W1, float* W2, void* workspace);
NLK_API int nlk_moneta_backward(int B, int T, int H, int d, int C, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, const float* k, const float* v, const float* q, const float* alpha,
    const float* theta, const float* W1_0, const float* W2_0, const float* dy, const float* dW1,
    const float* dW2, void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta,
    float* dW1_0, float* dW2_0);
NLK_API int nlk_moneta_frozen_workspace_bytes(int B, int T, int H, int d, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, size_t* bytes);
NLK_API int nlk_moneta_frozen_forward(int B, int T, int H, int d, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, const float* q, const float* W1, const float* W2, float* y,
    void* workspace);
NLK_API int nlk_moneta_frozen_backward(int B, int T, int H, int d, int d_hidden, double p, double q_hyper,
    double lambda_2, double sign_sharpness, const float* q, const float* W1, const float* W2, const float* dy,
    void* workspace, float* dq, float* dW1, float* dW2);
NLK_API int nlk_moneta_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* yaad: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state W1, W2; hyper int d_hidden, double delta, double lambda_local, double lambda_2 */
NLK_API int nlk_yaad_workspace_bytes(int B, int T, int H, int d, int C, int d_hidden, double delta,
    double lambda_local, double lambda_2, size_t* bytes);
NLK_API int nlk_yaad_forward(int B, int T, int H, int d, int C, int d_hidden, double delta, double lambda_local,
    double lambda_2, const float* k, const float* v, const float* q, const float* alpha, const float* theta,
    const float* W1_0, const float* W2_0, float* y, float* W1, float* W2, void* workspace);
NLK_API int nlk_yaad_backward(int B, int T, int H, int d, int C, int d_hidden, double delta, double lambda_local,
    double lambda_2, const float* k, const float* v, const float* q, const float* alpha, const float* theta,
    const float* W1_0, const float* W2_0, const float* dy, const float* dW1, const float* dW2, void* workspace,
    float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dW1_0, float* dW2_0);
NLK_API int nlk_yaad_frozen_workspace_bytes(int B, int T, int H, int d, int d_hidden, double delta,
    double lambda_local, double lambda_2, size_t* bytes);
NLK_API int nlk_yaad_frozen_forward(int B, int T, int H, int d, int d_hidden, double delta, double lambda_local,
    double lambda_2, const float* q, const float* W1, const float* W2, float* y, void* workspace);
NLK_API int nlk_yaad_frozen_backward(int B, int T, int H, int d, int d_hidden, double delta, double lambda_local,
    double lambda_2, const float* q, const float* W1, const float* W2, const float* dy, void* workspace,
    float* dq, float* dW1, float* dW2);
NLK_API int nlk_yaad_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* memora: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state W1, W2; hyper int d_hidden */
NLK_API int nlk_memora_workspace_bytes(int B, int T, int H, int d, int C, int d_hidden, size_t* bytes);
NLK_API int nlk_memora_forward(int B, int T, int H, int d, int C, int d_hidden, const float* k, const float* v,
    const float* q, const float* alpha, const float* theta, const float* W1_0, const float* W2_0, float* y,
    float* W1, float* W2, void* workspace);
NLK_API int nlk_memora_backward(int B, int T, int H, int d, int C, int d_hidden, const float* k, const float* v,
    const float* q, const float* alpha, const float* theta, const float* W1_0, const float* W2_0,
    const float* dy, const float* dW1, const float* dW2, void* workspace, float* dk, float* dv, float* dq,
    float* dalpha, float* dtheta, float* dW1_0, float* dW2_0);
NLK_API int nlk_memora_frozen_workspace_bytes(int B, int T, int H, int d, int d_hidden, size_t* bytes);
NLK_API int nlk_memora_frozen_forward(int B, int T, int H, int d, int d_hidden, const float* q, const float* W1,
    const float* W2, float* y, void* workspace);
NLK_API int nlk_memora_frozen_backward(int B, int T, int H, int d, int d_hidden, const float* q, const float* W1,
    const float* W2, const float* dy, void* workspace, float* dq, float* dW1, float* dW2);
NLK_API int nlk_memora_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* lattice: inputs k, v, q, alpha; gradients dk, dv, dq, dalpha; state S; hyper int m_slots, int variant (0 decode, 1 encode, 2 similarity) */
NLK_API int nlk_lattice_workspace_bytes(int B, int T, int H, int d, int C, int m_slots, int variant, size_t* bytes);
NLK_API int nlk_lattice_forward(int B, int T, int H, int d, int C, int m_slots, int variant, const float* k,
    const float* v, const float* q, const float* alpha, const float* S_0, float* y, float* S, void* workspace);
NLK_API int nlk_lattice_backward(int B, int T, int H, int d, int C, int m_slots, int variant, const float* k,
    const float* v, const float* q, const float* alpha, const float* S_0, const float* dy, const float* dS,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dS_0);
NLK_API int nlk_lattice_frozen_workspace_bytes(int B, int T, int H, int d, int m_slots, int variant, size_t* bytes);
NLK_API int nlk_lattice_frozen_forward(int B, int T, int H, int d, int m_slots, int variant, const float* q,
    const float* S, float* y, void* workspace);
NLK_API int nlk_lattice_frozen_backward(int B, int T, int H, int d, int m_slots, int variant, const float* q,
    const float* S, const float* dy, void* workspace, float* dq, float* dS);
NLK_API int nlk_lattice_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* trellis: inputs k, v, q, x, alpha, theta; gradients dk, dv, dq, dx, dalpha, dtheta; state S_K, S_V; hyper int d_compress, double lambda_k, double lambda_v */
NLK_API int nlk_trellis_workspace_bytes(int B, int T, int H, int d, int C, int d_compress, double lambda_k,
    double lambda_v, size_t* bytes);
NLK_API int nlk_trellis_forward(int B, int T, int H, int d, int C, int d_compress, double lambda_k, double lambda_v,
    const float* k, const float* v, const float* q, const float* x, const float* alpha, const float* theta,
    const float* S_K_0, const float* S_V_0, float* y, float* S_K, float* S_V, void* workspace);
NLK_API int nlk_trellis_backward(int B, int T, int H, int d, int C, int d_compress, double lambda_k, double lambda_v,
    const float* k, const float* v, const float* q, const float* x, const float* alpha, const float* theta,
    const float* S_K_0, const float* S_V_0, const float* dy, const float* dS_K, const float* dS_V,
    void* workspace, float* dk, float* dv, float* dq, float* dx, float* dalpha, float* dtheta, float* dS_K_0,
    float* dS_V_0);
NLK_API int nlk_trellis_frozen_workspace_bytes(int B, int T, int H, int d, int d_compress, double lambda_k,
    double lambda_v, size_t* bytes);
NLK_API int nlk_trellis_frozen_forward(int B, int T, int H, int d, int d_compress, double lambda_k, double lambda_v,
    const float* q, const float* S_K, const float* S_V, float* y, void* workspace);
NLK_API int nlk_trellis_frozen_backward(int B, int T, int H, int d, int d_compress, double lambda_k, double lambda_v,
    const float* q, const float* S_K, const float* S_V, const float* dy, void* workspace, float* dq,
    float* dS_K, float* dS_V);
NLK_API int nlk_trellis_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* atlas: inputs k, v, q, alpha, theta, eta, omega; gradients dk, dq, dalpha, dtheta, deta, domega; state M, S; hyper none */
NLK_API int nlk_atlas_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_atlas_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* omega, const float* M_0,
    const float* S_0, float* y, float* M, float* S, void* workspace);
NLK_API int nlk_atlas_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* omega, const float* M_0,
    const float* S_0, const float* dy, const float* dM, const float* dS, void* workspace, float* dk, float* dq,
    float* dalpha, float* dtheta, float* deta, float* domega, float* dM_0, float* dS_0);
NLK_API int nlk_atlas_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_atlas_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, const float* S,
    float* y, void* workspace);
NLK_API int nlk_atlas_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* S,
    const float* dy, void* workspace, float* dq, float* dM, float* dS);
NLK_API int nlk_atlas_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* gated_delta: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_gated_delta_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_gated_delta_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_gated_delta_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_gated_delta_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_gated_delta_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_gated_delta_frozen_backward(int B, int T, int H, int d, const float* q, const float* M,
    const float* dy, void* workspace, float* dq, float* dM);
NLK_API int nlk_gated_delta_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* kda: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_kda_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_kda_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_kda_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_kda_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_kda_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_kda_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_kda_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* comba: inputs k, v, q, p, alpha, theta; gradients dk, dv, dq, dp, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_comba_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_comba_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* p, const float* alpha, const float* theta, const float* M_0, float* y, float* M,
    void* workspace);
NLK_API int nlk_comba_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* p, const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dp, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_comba_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_comba_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_comba_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_comba_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* dplr: inputs k, v, q, a, b, alpha; gradients dk, dv, dq, da, db, dalpha; state M; hyper none */
NLK_API int nlk_dplr_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_dplr_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* a, const float* b, const float* alpha, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_dplr_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* a, const float* b, const float* alpha, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* da, float* db, float* dalpha, float* dM_0);
NLK_API int nlk_dplr_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_dplr_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_dplr_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_dplr_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* gated_delta_product: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper int n_h */
NLK_API int nlk_gated_delta_product_workspace_bytes(int B, int T, int H, int d, int C, int n_h, size_t* bytes);
NLK_API int nlk_gated_delta_product_forward(int B, int T, int H, int d, int C, int n_h, const float* k, const float* v,
    const float* q, const float* alpha, const float* theta, const float* M_0, float* y, float* M,
    void* workspace);
NLK_API int nlk_gated_delta_product_backward(int B, int T, int H, int d, int C, int n_h, const float* k,
    const float* v, const float* q, const float* alpha, const float* theta, const float* M_0, const float* dy,
    const float* dM, void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta,
    float* dM_0);
NLK_API int nlk_gated_delta_product_frozen_workspace_bytes(int B, int T, int H, int d, int n_h, size_t* bytes);
NLK_API int nlk_gated_delta_product_frozen_forward(int B, int T, int H, int d, int n_h, const float* q, const float* M,
    float* y, void* workspace);
NLK_API int nlk_gated_delta_product_frozen_backward(int B, int T, int H, int d, int n_h, const float* q,
    const float* M, const float* dy, void* workspace, float* dq, float* dM);
NLK_API int nlk_gated_delta_product_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* gdn2: inputs k, v, q, alpha, theta, eta; gradients dk, dv, dq, dalpha, dtheta, deta; state M; hyper none */
NLK_API int nlk_gdn2_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_gdn2_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* M_0, float* y, float* M,
    void* workspace);
NLK_API int nlk_gdn2_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* eta, const float* M_0, const float* dy,
    const float* dM, void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta,
    float* deta, float* dM_0);
NLK_API int nlk_gdn2_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_gdn2_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_gdn2_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_gdn2_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* gated_oja: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_gated_oja_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_gated_oja_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_gated_oja_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_gated_oja_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_gated_oja_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_gated_oja_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_gated_oja_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* gla: inputs k, v, q, alpha; gradients dk, dv, dq, dalpha; state M; hyper none */
NLK_API int nlk_gla_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_gla_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_gla_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* M_0, const float* dy, const float* dM, void* workspace, float* dk,
    float* dv, float* dq, float* dalpha, float* dM_0);
NLK_API int nlk_gla_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_gla_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_gla_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_gla_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* rwkv6: inputs k, v, q, alpha, theta; gradients dk, dv, dq, dalpha, dtheta; state M; hyper none */
NLK_API int nlk_rwkv6_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes);
NLK_API int nlk_rwkv6_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* workspace);
NLK_API int nlk_rwkv6_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
    const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
    void* workspace, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0);
NLK_API int nlk_rwkv6_frozen_workspace_bytes(int B, int T, int H, int d, size_t* bytes);
NLK_API int nlk_rwkv6_frozen_forward(int B, int T, int H, int d, const float* q, const float* M, float* y,
    void* workspace);
NLK_API int nlk_rwkv6_frozen_backward(int B, int T, int H, int d, const float* q, const float* M, const float* dy,
    void* workspace, float* dq, float* dM);
NLK_API int nlk_rwkv6_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* ttt_linear: inputs k, v, q, theta; gradients dk, dv, dq, dtheta; state M, M_b, ln_w, ln_b; hyper double eps */
NLK_API int nlk_ttt_linear_workspace_bytes(int B, int T, int H, int d, int C, double eps, size_t* bytes);
NLK_API int nlk_ttt_linear_forward(int B, int T, int H, int d, int C, double eps, const float* k, const float* v,
    const float* q, const float* theta, const float* M_0, const float* M_b_0, const float* ln_w_0,
    const float* ln_b_0, float* y, float* M, float* M_b, float* ln_w, float* ln_b, void* workspace);
NLK_API int nlk_ttt_linear_backward(int B, int T, int H, int d, int C, double eps, const float* k, const float* v,
    const float* q, const float* theta, const float* M_0, const float* M_b_0, const float* ln_w_0,
    const float* ln_b_0, const float* dy, const float* dM, const float* dM_b, const float* dln_w,
    const float* dln_b, void* workspace, float* dk, float* dv, float* dq, float* dtheta, float* dM_0,
    float* dM_b_0, float* dln_w_0, float* dln_b_0);
NLK_API int nlk_ttt_linear_frozen_workspace_bytes(int B, int T, int H, int d, double eps, size_t* bytes);
NLK_API int nlk_ttt_linear_frozen_forward(int B, int T, int H, int d, double eps, const float* q, const float* M,
    const float* M_b, const float* ln_w, const float* ln_b, float* y, void* workspace);
NLK_API int nlk_ttt_linear_frozen_backward(int B, int T, int H, int d, double eps, const float* q, const float* M,
    const float* M_b, const float* ln_w, const float* ln_b, const float* dy, void* workspace, float* dq,
    float* dM, float* dM_b, float* dln_w, float* dln_b);
NLK_API int nlk_ttt_linear_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* titans_linear: inputs k, v, q, alpha, theta, eta; gradients dk, dv, dq, dalpha, dtheta, deta; state M, S, ln_w, ln_b; hyper double eps */
NLK_API int nlk_titans_linear_workspace_bytes(int B, int T, int H, int d, int C, double eps, size_t* bytes);
NLK_API int nlk_titans_linear_forward(int B, int T, int H, int d, int C, double eps, const float* k, const float* v,
    const float* q, const float* alpha, const float* theta, const float* eta, const float* M_0,
    const float* S_0, const float* ln_w_0, const float* ln_b_0, float* y, float* M, float* S, float* ln_w,
    float* ln_b, void* workspace);
NLK_API int nlk_titans_linear_backward(int B, int T, int H, int d, int C, double eps, const float* k, const float* v,
    const float* q, const float* alpha, const float* theta, const float* eta, const float* M_0,
    const float* S_0, const float* ln_w_0, const float* ln_b_0, const float* dy, const float* dM,
    const float* dS, const float* dln_w, const float* dln_b, void* workspace, float* dk, float* dv, float* dq,
    float* dalpha, float* dtheta, float* deta, float* dM_0, float* dS_0, float* dln_w_0, float* dln_b_0);
NLK_API int nlk_titans_linear_frozen_workspace_bytes(int B, int T, int H, int d, double eps, size_t* bytes);
NLK_API int nlk_titans_linear_frozen_forward(int B, int T, int H, int d, double eps, const float* q, const float* M,
    const float* S, const float* ln_w, const float* ln_b, float* y, void* workspace);
NLK_API int nlk_titans_linear_frozen_backward(int B, int T, int H, int d, double eps, const float* q, const float* M,
    const float* S, const float* ln_w, const float* ln_b, const float* dy, void* workspace, float* dq,
    float* dM, float* dS, float* dln_w, float* dln_b);
NLK_API int nlk_titans_linear_chunk_form(int* kind, int* C);  /* optional: docs/spec/kernel-abi.md#chunk-form */

/* swa: inputs k, v, q; gradients dk, dv, dq; state none; hyper int heads, int window */
NLK_API int nlk_swa_workspace_bytes(int B, int T, int H, int d, int heads, int window, size_t* bytes);
NLK_API int nlk_swa_forward(int B, int T, int H, int d, int heads, int window, const float* k, const float* v,
    const float* q, float* y, void* workspace);
NLK_API int nlk_swa_backward(int B, int T, int H, int d, int heads, int window, const float* k, const float* v,
    const float* q, const float* dy, void* workspace, float* dk, float* dv, float* dq);

/* ── END GENERATED ── */

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

#ifdef __cplusplus
}
#endif

#endif /* NLK_H */
