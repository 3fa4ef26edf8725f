/*
 * Shared by every kernel pair: device math, shared-memory carving, block reductions, and the
 * host-side call helper (argument checks, device buffers, launch status, kernel timing).
 *
 * Kernel shape, for every pair: one block per sequence (blockIdx.x = b), the block's threads
 * split the rows (or columns, or tokens) of the state between them, per-token vectors live in
 * dynamic shared memory, and __syncthreads() separates the phases of a token. Reductions are
 * written to shared memory and summed by thread 0 in a fixed order: results do not depend on
 * thread scheduling, which the cpu-emu race check verifies bit for bit.
 */
#pragma once

#include "portable.cuh"
#include "../ffi/nlk.h"

#include <stddef.h>
#include <stdint.h>

/**
 * Precision. Every tensor a kernel reads or writes, and every per-token state the forward saves, is
 * f32 (a bf16-storage build converts at the ABI, in the generated wrappers: storage.cuh).
 * Dot products and reductions accumulate in acc_t, and the backward's running adjoints (∂L/∂state,
 * carried across the whole sequence) live in adj_t — f64 by default, as in the reference's f32 mode
 * (f32 storage, f64 accumulation). With both set to float (-DNLK_ACC=float -DNLK_ADJ=float) the
 * kernels are all-f32 and C5's 2x bound is exceeded on some cases (see cuda/README.md).
 */
#ifndef NLK_ACC
#define NLK_ACC double
#endif
#ifndef NLK_ADJ
#define NLK_ADJ double
#endif
typedef NLK_ACC acc_t;
typedef NLK_ADJ adj_t;

namespace nlk {

// ── device math (exact formulas; no fast-math intrinsics), in f32 or f64 ──────────────────

template <class T>
__host__ __device__ inline T sigmoid(T x) {
  // the stable form (spec D6): no exp of a large positive argument, no saturation cut
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  const T e = exp(x);
  return e / (T(1) + e);
}
template <class T>
__host__ __device__ inline T silu(T x) {
  return x * sigmoid(x);
}
template <class T>
__host__ __device__ inline T silu_prime(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}
template <class T>
__host__ __device__ inline T silu_second(T x) {
  const T s = sigmoid(x);
  return s * (T(1) - s) * (T(2) + x * (T(1) - T(2) * s));
}

// ── shared memory ───────────────────────────────────────────────────────────────────────────

/**
 * Carves typed arrays out of one dynamic shared-memory buffer. A kernel's layout struct takes a
 * Carver: the host runs it on a null base to get the byte count, the kernel on the real buffer,
 * so the two can never disagree.
 */
struct Carver {
  uintptr_t base;
  size_t off;
  __host__ __device__ explicit Carver(void* b) : base(reinterpret_cast<uintptr_t>(b)), off(0) {}
  template <class T>
  __host__ __device__ T* take(size_t n) {
    off = (off + 15) & ~static_cast<size_t>(15);
    T* p = reinterpret_cast<T*>(base + off);
    off += n * sizeof(T);
    return p;
  }
};

/** The layout struct `Layout(Carver&, args...)` on this block's dynamic shared memory. */
template <class Layout, class... A>
__device__ inline Layout carve_shared(A... args) {
  Carver c(nlk_shared<unsigned char>());
  return Layout(c, args...);
}

/**
 * The bytes of a layout struct `Layout(Carver&, args...)` carved from a null base: the dynamic
 * shared memory of carve_shared<Layout>(args...) for a launch, or a workspace size.
 */
template <class Layout, class... A>
inline size_t layout_bytes(A... args) {
  Carver c(nullptr);
  Layout layout(c, args...);
  (void)layout;
  return c.off;
}

/** Copies n floats, spread over the block (no barrier). */
__device__ inline void block_copy(float* dst, const float* src, size_t n) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
}

/** The ABI shape of a call: B batches, T tokens, H heads, d per head (nlk.h). */
struct Shape {
  int B, T, H, d;
  __host__ __device__ int seqs() const { return B * H; }
};

/**
 * Sequence n = b·H + h of a call (one block each: n = blockIdx.x) and where its data lives: token t
 * of a per-token tensor [B,T,H,d] at vec(t), of a gate [B,T,H] at gate(t), its state [B,H,r,c] at
 * state(rc). Every kernel indexes through this, so heads are handled in one place.
 */
struct Seq {
  size_t b, h, n, T, H, d;
  __host__ __device__ Seq(const Shape& s, int n_) : b(n_ / s.H), h(n_ % s.H), n(n_), T(s.T), H(s.H), d(s.d) {}
  __host__ __device__ size_t vec(int t) const { return ((b * T + t) * H + h) * d; }
  __host__ __device__ size_t gate(int t) const { return (b * T + t) * H + h; }
  __host__ __device__ size_t state(size_t rc) const { return n * rc; }
};

/** Copies n floats from global src to shared dst, spread over the block (no barrier). */
__device__ inline void load_vec(float* dst, const float* src, int n) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src[j];
}

/** Copies n floats from global src to shared dst, or zeros when src is NULL (an absent dy). */
__device__ inline void load_vec_or_zero(float* dst, const float* src, int n) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src == nullptr ? 0.0f : src[j];
}

/** This thread's row of n f64 dynamic shared scratch, for kernels where a thread owns a token. */
__device__ inline acc_t* thread_row(int n) { return nlk_shared<acc_t>() + static_cast<size_t>(threadIdx.x) * n; }

/** Σ over the block's threads of partial row i, red[i * nt + t], in thread order (one thread). */
__device__ inline acc_t ordered_sum(const acc_t* red, int i) {
  const int nt = blockDim.x;
  acc_t s = 0;
  for (int t = 0; t < nt; t++) s += red[i * nt + t];
  return s;
}

/**
 * Sum over the block of each thread's `k` partials red[i * nt + tid] into red[i * nt] (i < k),
 * in thread order, by thread 0. Barrier before (the partials) and after (the result).
 */
__device__ inline void block_sums(acc_t* red, int k) {
  __syncthreads();
  const int nt = blockDim.x;
  if (threadIdx.x == 0) {
    for (int i = 0; i < k; i++) red[i * nt] = ordered_sum(red, i);
  }
  __syncthreads();
}

/** Swaps two pointers: the adjoint buffer pairs that trade roles after each token. */
template <class T>
__device__ inline void swap(T*& a, T*& b) {
  T* t = a;
  a = b;
  b = t;
}

}  // namespace nlk

// ── host side ───────────────────────────────────────────────────────────────────────────────

namespace nlk {

/** Kernel time of the calling thread's last call (nlk_last_kernel_ms). */
extern thread_local double last_kernel_ms;

/** Threads per block for `work` rows: whole warps on a GPU, few fibers on the CPU. */
inline int threads_for(int work) {
#if defined(__CUDACC__)
  const bool gpu_sized = true;
#else
  // Few fibers keep the emulation fast; 16 also makes the deep profile's d = 33..40 give several
  // rows per thread. nlk_emu_set_block_policy(1) sizes blocks as the GPU build does (idle threads).
  const bool gpu_sized = nlk_emu::block_policy() == 1;
#endif
  const int cap = gpu_sized ? 256 : 16;
  int n = gpu_sized ? ((work + 31) / 32) * 32 : work;
  if (n < 1) n = 1;
  return n < cap ? n : cap;
}

template <class... P>
inline bool any_null(P... p) {
  bool bad = false;
  ((bad = bad || p == nullptr), ...);
  return bad;
}

/** Every pointer non-null, else NLK_ERR_NULL_POINTER (the generated wrappers' check). */
#define NLK_REQUIRE_PTRS(...) \
  do {                        \
    if (::nlk::any_null(__VA_ARGS__)) return NLK_ERR_NULL_POINTER; \
  } while (0)

/**
 * Times one ABI call (nlk_last_kernel_ms): created before the launcher runs, finish(status) takes
 * the launch status, synchronises (every call has finished when it returns) and records the time.
 */
class KernelTimer {
 public:
  KernelTimer() {
    if (cudaEventCreate(&ev0_) != cudaSuccess || cudaEventCreate(&ev1_) != cudaSuccess || cudaEventRecord(ev0_, 0) != cudaSuccess) ok_ = false;
  }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;
  ~KernelTimer() {
    if (ev0_ != nullptr) cudaEventDestroy(ev0_);
    if (ev1_ != nullptr) cudaEventDestroy(ev1_);
  }
  int finish(int status) {
    if (status != 0) return status;
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && ok_) e = cudaEventRecord(ev1_, 0);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return static_cast<int>(e);
    float ms = 0;
    if (ok_ && cudaEventElapsedTime(&ms, ev0_, ev1_) == cudaSuccess) last_kernel_ms = ms;
    return 0;
  }

 private:
  cudaEvent_t ev0_ = nullptr, ev1_ = nullptr;
  bool ok_ = true;
};

/** The launch status of the kernels just queued (a launcher's return value). */
inline int launch_status() { return static_cast<int>(cudaGetLastError()); }

}  // namespace nlk
