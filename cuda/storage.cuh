/*
 * Storage precision of the ABI (docs/spec/kernel-abi.md#bf16-storage).
 *
 * A build compiled with -DNLK_STORAGE_BF16=1 takes and returns every per-token tensor and gate as
 * bf16 (the upper 16 bits of an f32, carried as uint16_t behind the header's float* types); states
 * stay f32. The kernels themselves do not change: the generated wrapper widens each bf16 input into
 * a temporary f32 buffer, runs the same f32 launchers, and narrows each f32 output back to bf16.
 * So that build computes exactly "round the inputs to bf16, run the f32 kernels, round the outputs".
 *
 * The conversions are bit operations, identical in nvcc and the cpu emulation, so the cuda and
 * cpu-emu bf16 builds round the same way.
 */
#pragma once

#include "common.cuh"

#include <string.h>

#ifndef NLK_STORAGE_BF16
#define NLK_STORAGE_BF16 0
#endif

namespace nlk {

__host__ __device__ inline uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

__host__ __device__ inline float f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/** bf16 -> f32: every bf16 value is an f32 with a zero lower half (exact). */
__host__ __device__ inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

/**
 * f32 -> bf16, round to nearest, ties to even; overflow rounds to ±inf. A NaN stays a NaN, kept
 * apart from the rounding: the increment would carry out of an all-ones payload (the NaN fill
 * 0xffffffff would become 0, the GPU's 0x7fffffff -0), and a payload only in the dropped half would
 * truncate to ±inf, so the quiet bit is set on the upper half.
 */
__host__ __device__ inline uint16_t f32_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t tie_to_even = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + tie_to_even) >> 16);
}

__host__ __device__ inline float storage_cast(float*, uint16_t h) { return bf16_to_f32(h); }
__host__ __device__ inline uint16_t storage_cast(uint16_t*, float x) { return f32_to_bf16(x); }

/** The other side of a conversion: bf16 (uint16_t) widens to float, float narrows to bf16. */
template <class Dst>
struct StorageSource;
template <>
struct StorageSource<float> {
  typedef uint16_t type;
};
template <>
struct StorageSource<uint16_t> {
  typedef float type;
};

/** dst[i] = src[i] converted (bf16 <-> f32), grid-stride. A template: no unused-function warnings, one copy per program. */
template <class Dst>
__global__ void convert_storage(const typename StorageSource<Dst>::type* __restrict__ src, Dst* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = storage_cast(static_cast<Dst*>(nullptr), src[i]);
  }
}

/**
 * The temporary f32 buffers of one bf16-storage call. `in` widens a bf16 input (NULL stays NULL),
 * `out` hands the kernel an f32 buffer for a bf16 output, filled with NaN so that an element the
 * kernel does not write still reads NaN after narrowing; `narrow(status)` converts every output once
 * the launcher has queued its kernels. The buffers are freed when the object goes out of scope, on
 * every return path. Sizes: `vec` elements for a per-token tensor, `gate` for a gate.
 */
class Bf16Staging {
 public:
  static constexpr int kMaxBuffers = 24;
  explicit Bf16Staging(const Shape& s)
      : vec(static_cast<size_t>(s.B) * s.T * s.H * s.d), gate(static_cast<size_t>(s.B) * s.T * s.H) {}
  Bf16Staging(const Bf16Staging&) = delete;
  Bf16Staging& operator=(const Bf16Staging&) = delete;
  ~Bf16Staging() {
    if (count_ > 0) cudaDeviceSynchronize();  // no kernel may still use a buffer being freed
    for (int i = 0; i < count_; i++) cudaFree(buf_[i].f32);
  }

  const size_t vec, gate;

  const float* in(const float* bf16, size_t n) {
    if (bf16 == nullptr) return nullptr;
    float* f = alloc(n, nullptr);
    if (f != nullptr) launch(reinterpret_cast<const uint16_t*>(bf16), f, n);
    return f;
  }

  float* out(float* bf16, size_t n) {
    float* f = alloc(n, reinterpret_cast<uint16_t*>(bf16));
    if (f != nullptr) note(cudaMemset(f, 0xff, n * sizeof(float)));  // all-ones bits: NaN
    return f;
  }

  int status() const { return status_; }

  /** After the launcher: its status, else the outputs narrowed to bf16 (queued). */
  int narrow(int launcher_status) {
    if (launcher_status != NLK_OK) return launcher_status;
    if (status_ != NLK_OK) return status_;
    for (int i = 0; i < count_; i++) {
      if (buf_[i].bf16 != nullptr) launch(buf_[i].f32, buf_[i].bf16, buf_[i].n);
    }
    return status_;
  }

 private:
  struct Buffer {
    float* f32;
    uint16_t* bf16;  // the caller's output, or NULL for an input
    size_t n;
  };
  Buffer buf_[kMaxBuffers] = {};
  int count_ = 0;
  int status_ = NLK_OK;

  void note(cudaError_t e) {
    if (e != cudaSuccess && status_ == NLK_OK) status_ = static_cast<int>(e);
  }

  float* alloc(size_t n, uint16_t* bf16) {
    if (status_ != NLK_OK) return nullptr;
    if (count_ == kMaxBuffers) {
      status_ = NLK_ERR_UNSUPPORTED;
      return nullptr;
    }
    float* f = nullptr;
    note(cudaMalloc(&f, (n == 0 ? 1 : n) * sizeof(float)));
    if (status_ != NLK_OK) return nullptr;
    buf_[count_++] = {f, bf16, n};
    return f;
  }

  template <class Dst>
  void launch(const typename StorageSource<Dst>::type* src, Dst* dst, size_t n) {
    const int threads = threads_for(256);
    size_t blocks = (n + threads - 1) / threads;
    if (blocks > 1024) blocks = 1024;
    if (blocks < 1) blocks = 1;
    NLK_LAUNCH(convert_storage<Dst>, static_cast<unsigned>(blocks), threads, 0)(src, dst, n);
    note(cudaGetLastError());
  }
};

}  // namespace nlk
