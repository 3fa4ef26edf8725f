/*
 * Test-only kernels, built into build/libnlk-cpu-test.so and never into a library a user loads:
 * they plant the faults the suite must survive or detect.
 *   nlk_test_crash(mode)       0: a thread writes through NULL (SIGSEGV); 1: abort(); 2: spins forever
 *   nlk_test_race(n, out)      a missing __syncthreads(): thread i reads its neighbour's slot
 *   nlk_test_divergent_sync(m) 0: halves of the block wait at two different __syncthreads();
 *                              1: thread 0 returns while the others wait
 */
#include "../common.cuh"

#include <stdlib.h>

namespace {

__global__ void crash_kernel(int mode, float* out) {
  out[threadIdx.x] = 0.0f;
  __syncthreads();
  if (threadIdx.x == 1) {
    if (mode == 0) {
      // hide the null from the optimiser, which may otherwise drop a store it can prove is UB
      volatile float* nowhere = nullptr;
      asm volatile("" : "+r"(nowhere));
      *nowhere = 1.0f;
    } else if (mode == 1) {
      abort();
    } else {
      volatile int spin = 1;
      while (spin != 0) {
      }
    }
  }
  __syncthreads();
}

__global__ void race_kernel(int n, float* out) {
  float* slot = nlk_shared<float>();
  const int i = threadIdx.x;
  slot[i] = static_cast<float>(i + 1);
  // deliberately no __syncthreads() here
  out[i] = slot[(i + 1) % n];
}

__global__ void divergent_kernel(int mode) {
  if (mode == 0) {
    if (threadIdx.x % 2 == 0) {
      __syncthreads();
    } else {
      __syncthreads();
    }
  } else {
    if (threadIdx.x == 0) return;
    __syncthreads();
  }
}

}  // namespace

extern "C" {

NLK_API int nlk_test_crash(int mode) {
  float* out = nullptr;
  if (cudaMalloc(&out, 4 * sizeof(float)) != cudaSuccess) return NLK_ERR_BAD_SIZE;
  nlk::KernelTimer timer;
  NLK_LAUNCH(crash_kernel, 1, 4, 0)(mode, out);
  const int st = timer.finish(nlk::launch_status());
  cudaFree(out);
  return st;
}

/** out: host memory (the race check reads it back directly). */
NLK_API int nlk_test_race(int n, float* out) {
  if (n < 2 || n > 1024) return NLK_ERR_BAD_SIZE;
  NLK_REQUIRE_PTRS(out);
  float* o = nullptr;
  if (cudaMalloc(&o, static_cast<size_t>(n) * sizeof(float)) != cudaSuccess) return NLK_ERR_BAD_SIZE;
  nlk::KernelTimer timer;
  NLK_LAUNCH(race_kernel, 1, n, static_cast<size_t>(n) * sizeof(float))(n, o);
  int st = timer.finish(nlk::launch_status());
  if (st == 0) st = static_cast<int>(cudaMemcpy(out, o, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(o);
  return st;
}

NLK_API int nlk_test_divergent_sync(int mode) {
  nlk::KernelTimer timer;
  NLK_LAUNCH(divergent_kernel, 1, 4, 0)(mode);
  return timer.finish(nlk::launch_status());
}

}  // extern "C"
