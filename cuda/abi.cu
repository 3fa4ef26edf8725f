/* Identity and diagnostics of the library (nlk.h "identity and diagnostics"). */
#include "storage.cuh"

#include <stdio.h>
#include <string.h>

namespace nlk {
thread_local double last_kernel_ms = 0.0;
}

extern "C" {

NLK_API int nlk_abi_version(void) { return NLK_ABI_VERSION; }

NLK_API const char* nlk_backend_name(void) {
#if defined(__CUDACC__)
  return "cuda";
#else
  return "cpu-emu";
#endif
}

NLK_API int nlk_device_info(char* name, int cap) {
  if (name == nullptr || cap < 1) return NLK_ERR_NULL_POINTER;
  name[0] = '\0';
#if defined(__CUDACC__)
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (count < 1) return static_cast<int>(cudaErrorNoDevice);
  cudaDeviceProp p;
  e = cudaGetDeviceProperties(&p, 0);
  if (e != cudaSuccess) return static_cast<int>(e);
  snprintf(name, static_cast<size_t>(cap), "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
           p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
#else
  snprintf(name, static_cast<size_t>(cap), "cpu-emu (%d worker threads, fibers)", nlk_emu_workers());
#endif
  return 0;
}

NLK_API double nlk_device_peak_gbps(void) {
#if defined(__CUDACC__)
  int khz = 0, bits = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess) return 0.0;
  if (cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) return 0.0;
  return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;  // double data rate
#else
  return 0.0;
#endif
}

NLK_API double nlk_last_kernel_ms(void) { return nlk::last_kernel_ms; }

NLK_API const char* nlk_status_string(int status) {
  switch (status) {
    case NLK_OK: return "ok";
    case NLK_ERR_NULL_POINTER: return "a required pointer is NULL";
    case NLK_ERR_BAD_SIZE: return "bad size (B, T, H, d, C must be >= 1; or too large for the kernel)";
    case NLK_ERR_BAD_HYPER: return "hyperparameter outside its domain";
    case NLK_ERR_UNSUPPORTED: return "not supported by this library";
    case NLK_ERR_EMU_SYNC_DIVERGENT: return "cpu-emu: __syncthreads() reached from different call sites";
    case NLK_ERR_EMU_SYNC_EXITED: return "cpu-emu: __syncthreads() reached after other threads of the block returned";
    default: break;
  }
  if (status > 0) return cudaGetErrorString(static_cast<cudaError_t>(status));
  return "unknown status";
}

// Every function of this library keeps states in f32 and accumulates in acc_t; the tensors crossing
// the ABI are f32, or bf16 in a -DNLK_STORAGE_BF16=1 build (storage.cuh).
NLK_API int nlk_dtypes(const char* fn, int* storage, int* state, int* accumulate) {
  if (fn == nullptr || storage == nullptr || state == nullptr || accumulate == nullptr) return NLK_ERR_NULL_POINTER;
  if (strncmp(fn, "nlk_", 4) != 0) return NLK_ERR_UNSUPPORTED;
  *storage = NLK_STORAGE_BF16 ? NLK_DTYPE_BF16 : NLK_DTYPE_F32;
  *state = NLK_DTYPE_F32;
  *accumulate = sizeof(acc_t) == 8 ? NLK_DTYPE_F64 : NLK_DTYPE_F32;
  return NLK_OK;
}

// ── memory: device memory in the cuda build, host memory (the emulation's cudaMalloc) in cpu-emu ──
NLK_API int nlk_alloc(size_t bytes, void** out) {
  if (out == nullptr) return NLK_ERR_NULL_POINTER;
  *out = nullptr;
  return static_cast<int>(cudaMalloc(out, bytes == 0 ? 1 : bytes));
}
NLK_API int nlk_free(void* p) { return p == nullptr ? NLK_OK : static_cast<int>(cudaFree(p)); }
NLK_API int nlk_copy_in(void* dst, const void* host_src, size_t bytes) {
  if (dst == nullptr || host_src == nullptr) return NLK_ERR_NULL_POINTER;
  return static_cast<int>(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}
NLK_API int nlk_copy_out(void* host_dst, const void* src, size_t bytes) {
  if (host_dst == nullptr || src == nullptr) return NLK_ERR_NULL_POINTER;
  return static_cast<int>(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}
NLK_API int nlk_synchronize(void) { return static_cast<int>(cudaDeviceSynchronize()); }

}  // extern "C"
