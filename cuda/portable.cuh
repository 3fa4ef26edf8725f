/*
 * portable.cuh — lets one .cu source build two ways:
 *   nvcc (__CUDACC__): real CUDA, this header only adds the launch macro and nlk_shared<T>().
 *   g++ -x c++ (NLK_EMU): CUDA emulated on the CPU. Each block runs on a worker thread of the
 *     library (never on the caller's thread: Bun's JS thread must not switch stacks), each CUDA
 *     thread of the block is a fiber (glibc ucontext) and __syncthreads() is a barrier between
 *     fibers. A thread-per-CUDA-thread mode exists for ThreadSanitizer runs (nlk_emu_set_mode).
 *
 * What kernels may use: threadIdx/blockIdx/blockDim/gridDim (x only is meaningful), dynamic shared
 * memory through nlk_shared<T>(), __syncthreads(), plain float/double math. What they may NOT use,
 * in either build (so a kernel that works in one works in the other): static __shared__ arrays,
 * warp shuffles/votes, atomics, __syncwarp, fences. Those names are poisoned below.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <math.h>

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define NLK_LAUNCH(kernel, grid, block, smem) kernel<<<(grid), (block), (smem)>>>
/* The same, naming the kernel for the emulation's messages (a template kernel: the rule's name); a statement. */
#define NLK_LAUNCH_NAMED(kernel, name, grid, block, smem) \
  (void)(name);                                           \
  kernel<<<(grid), (block), (smem)>>>
/* A device function that must compile to one body (a forward step replayed by the backward). */
#define NLK_NOINLINE __noinline__

template <class T>
__device__ __forceinline__ T* nlk_shared() {
  extern __shared__ __align__(16) unsigned char nlk_dynamic_smem[];
  return reinterpret_cast<T*>(nlk_dynamic_smem);
}

#else  // ── CPU emulation ────────────────────────────────────────────────────────────────

#ifndef NLK_EMU
#define NLK_EMU 1
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define NLK_NOINLINE __attribute__((noinline))
#define __restrict__ __restrict

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};

namespace nlk_emu {

/** What one emulated CUDA thread sees; the scheduler points tls_ctx at the running thread's. */
struct ThreadCtx {
  uint3 tid;
  uint3 bid;
  dim3 bdim;
  dim3 gdim;
  unsigned char* smem;
};

extern thread_local ThreadCtx* tls_ctx;

/** Barrier of the current block; `site` identifies the call site (divergence is an error). */
void sync_threads(const char* file, int line);

/** 0: few threads per block (the default); 1: blocks sized as on a GPU (whole warps, up to 256). */
int block_policy();

typedef void (*Body)(void* closure);
/** Runs the grid to completion on the library's worker threads; records an error for cudaGetLastError. */
void launch(dim3 grid, dim3 block, size_t smem, const char* name, Body body, void* closure);

template <class F>
struct Launch {
  F fn;
  dim3 grid, block;
  size_t smem;
  const char* name;
  template <class... A>
  void operator()(A... args) {
    // Each emulated thread calls the kernel with its own copies of the arguments, as CUDA does.
    auto call = [&]() { fn(args...); };
    launch(grid, block, smem, name, [](void* c) { (*static_cast<decltype(call)*>(c))(); }, &call);
  }
};

}  // namespace nlk_emu

#define threadIdx (::nlk_emu::tls_ctx->tid)
#define blockIdx (::nlk_emu::tls_ctx->bid)
#define blockDim (::nlk_emu::tls_ctx->bdim)
#define gridDim (::nlk_emu::tls_ctx->gdim)
#define __syncthreads() ::nlk_emu::sync_threads(__FILE__, __LINE__)
#define NLK_LAUNCH(kernel, grid, block, smem) \
  ::nlk_emu::Launch<decltype(&kernel)>{&kernel, dim3(grid), dim3(block), (size_t)(smem), #kernel}
#define NLK_LAUNCH_NAMED(kernel, name, grid, block, smem) \
  ::nlk_emu::Launch<decltype(&kernel)>{&kernel, dim3(grid), dim3(block), (size_t)(smem), (name)}

template <class T>
inline T* nlk_shared() {
  return reinterpret_cast<T*>(::nlk_emu::tls_ctx->smem);
}

// ── the slice of the CUDA runtime API the host wrappers use ──────────────────────────────
typedef int cudaError_t;
enum : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
typedef struct nlk_emu_event* cudaEvent_t;

cudaError_t cudaMalloc(void** p, size_t bytes);
template <class T>
inline cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaGetLastError(void);
cudaError_t cudaDeviceSynchronize(void);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventRecord(cudaEvent_t e, int stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop);
cudaError_t cudaEventDestroy(cudaEvent_t e);

#endif  // emulation

// ── banned in kernels, in both builds (defined after every CUDA header this file includes) ──
#undef __shared__
#define __shared__ nlk_banned__static___shared___use_nlk_shared
#define __shfl_sync nlk_banned__warp_shuffles_are_not_emulated
#define __shfl_up_sync nlk_banned__warp_shuffles_are_not_emulated
#define __shfl_down_sync nlk_banned__warp_shuffles_are_not_emulated
#define __shfl_xor_sync nlk_banned__warp_shuffles_are_not_emulated
#define __ballot_sync nlk_banned__warp_votes_are_not_emulated
#define __any_sync nlk_banned__warp_votes_are_not_emulated
#define __all_sync nlk_banned__warp_votes_are_not_emulated
#define __syncwarp nlk_banned__syncwarp_is_not_emulated
#define atomicAdd nlk_banned__atomics_are_not_emulated
#define atomicSub nlk_banned__atomics_are_not_emulated
#define atomicExch nlk_banned__atomics_are_not_emulated
#define atomicCAS nlk_banned__atomics_are_not_emulated
#define atomicMax nlk_banned__atomics_are_not_emulated
#define atomicMin nlk_banned__atomics_are_not_emulated
#define __threadfence nlk_banned__fences_are_not_emulated
