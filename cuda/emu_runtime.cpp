/*
 * The CPU emulation runtime (only in the cpu-emu build): worker threads, fibers, barriers,
 * the emulated CUDA runtime calls, and the emulation controls exported through nlk.h.
 *
 * Model. A launch hands the grid to a pool of worker threads (NLK_EMU_WORKERS, default: one per
 * core) and waits. A worker runs one block at a time: every CUDA thread of the block is a fiber
 * (ucontext) on that worker; the scheduler resumes the runnable fibers in thread order (or in
 * reverse order, for the race check) until each one finishes or parks in __syncthreads(). When all
 * are parked at the SAME call site the barrier opens. Parked at different call sites, or some
 * parked while others already returned, is a kernel bug: the block is abandoned and the launch
 * reports NLK_ERR_EMU_SYNC_DIVERGENT / NLK_ERR_EMU_SYNC_EXITED.
 *
 * Thread mode (nlk_emu_set_mode(1) or NLK_EMU_MODE=threads): one OS thread per CUDA thread and a
 * condition-variable barrier with the same checks, so ThreadSanitizer sees real concurrency.
 *
 * The switch between fibers. glibc's swapcontext saves and restores the signal mask with a system
 * call on every switch, and a block parks every thread at every __syncthreads(): at production
 * shapes that system call was most of the emulation's time. On x86-64 the switch is instead a few
 * instructions (FiberSwitch below: the callee-saved registers, the stack pointer, MXCSR and the x87
 * control word, which is everything the System V ABI asks a call to preserve); the fibers' signal
 * mask is the worker's and no fiber changes it. The arithmetic and the scheduling order are the
 * same, so every kernel output is bitwise the same (bench/kernel-bitwise.ts). Elsewhere (another
 * architecture, or an AddressSanitizer build, which must see the switches) ucontext remains.
 */
#include "portable.cuh"
#include "../ffi/nlk.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nlk_emu {

thread_local ThreadCtx* tls_ctx = nullptr;

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define NLK_FAST_SWITCH 1
#else
#define NLK_FAST_SWITCH 0
#endif

#if NLK_FAST_SWITCH
// nlk_emu_switch(void** save, void* load): pushes the callee-saved registers and the FP control
// words on the current stack, stores the stack pointer in *save, continues on the stack `load`
// (one that this function saved, or one that fiber_frame laid out) and returns there.
// nlk_emu_fiber_start: where a new fiber's first switch returns to; calls r13(r12).
asm(R"(
  .text
  .p2align 4
  .globl nlk_emu_switch
  .hidden nlk_emu_switch
  .type nlk_emu_switch, @function
nlk_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size nlk_emu_switch, .-nlk_emu_switch

  .p2align 4
  .globl nlk_emu_fiber_start
  .hidden nlk_emu_fiber_start
  .type nlk_emu_fiber_start, @function
nlk_emu_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size nlk_emu_fiber_start, .-nlk_emu_fiber_start
)");
extern "C" void nlk_emu_switch(void** save, void* load);
extern "C" void nlk_emu_fiber_start();
#endif

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // the default dynamic shared memory limit of a CUDA launch
constexpr unsigned kMaxThreads = 1024;

std::atomic<int> g_order_reversed{0};
std::atomic<int> g_block_policy{0};
std::atomic<int> g_mode{-1};  // -1: read NLK_EMU_MODE on first use; 0 fibers; 1 threads
thread_local int tls_last_error = 0;
std::mutex g_detail_mu;
std::string g_detail;

void set_detail(const std::string& s) {
  std::lock_guard<std::mutex> lk(g_detail_mu);
  g_detail = s;
}

int mode() {
  int m = g_mode.load();
  if (m < 0) {
#ifdef NLK_TSAN
    m = 1;  // ThreadSanitizer cannot follow ucontext switches: the TSan build always runs threads
#else
    const char* e = getenv("NLK_EMU_MODE");
    m = (e != nullptr && strcmp(e, "threads") == 0) ? 1 : 0;
#endif
    g_mode.store(m);
  }
  return m;
}

struct Job {
  dim3 grid, block;
  size_t smem;
  const char* name;
  Body body;
  void* closure;
  bool reversed;
  std::atomic<unsigned> next{0};
  std::mutex mu;
  int error = 0;

  void fail(int code, const std::string& what) {
    std::lock_guard<std::mutex> lk(mu);
    if (error == 0) {
      error = code;
      set_detail(std::string(name) + ": " + what);
    }
  }
};

std::string site(const char* file, int line) {
  const char* base = strrchr(file, '/');
  return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}

// ── fiber mode ───────────────────────────────────────────────────────────────────────────

enum FiberState { kRunnable, kParked, kDone };

struct Fiber {
#if NLK_FAST_SWITCH
  void* sp;
#else
  ucontext_t ctx;
#endif
  ThreadCtx tc;
  FiberState state;
  const char* file;
  int line;
};

struct FiberBlock {
  Job* job;
#if NLK_FAST_SWITCH
  void* sched;
#else
  ucontext_t sched;
#endif
  Fiber* cur;
  std::vector<Fiber> fibers;
};

thread_local FiberBlock* tls_fiber_block = nullptr;

#if NLK_FAST_SWITCH
void fiber_main(Fiber* f) {
  FiberBlock* fb = tls_fiber_block;
  fb->job->body(fb->job->closure);
  f->state = kDone;
  nlk_emu_switch(&f->sp, fb->sched);  // never resumed
}

/** Lays out a new fiber's stack below `top` so that the first switch to it calls fiber_main(f). */
void* fiber_frame(char* top, Fiber* f) {
  uintptr_t t = reinterpret_cast<uintptr_t>(top) & ~static_cast<uintptr_t>(15);
  // Popped by nlk_emu_switch: control words, r15, r14, r13, r12, rbx, rbp, then the return
  // address; nlk_emu_fiber_start then runs with the stack 16-byte aligned, as a call expects.
  auto* w = reinterpret_cast<uint64_t*>(t - 16 - 64);
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  w[0] = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fpucw) << 32);
  w[1] = 0;                                                  // r15
  w[2] = 0;                                                  // r14
  w[3] = reinterpret_cast<uint64_t>(&fiber_main);            // r13
  w[4] = reinterpret_cast<uint64_t>(f);                      // r12
  w[5] = 0;                                                  // rbx
  w[6] = 0;                                                  // rbp
  w[7] = reinterpret_cast<uint64_t>(&nlk_emu_fiber_start);   // return address
  return w;
}
#else
void fiber_entry(unsigned lo, unsigned hi) {
  Fiber* f = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
  FiberBlock* fb = tls_fiber_block;
  fb->job->body(fb->job->closure);
  f->state = kDone;
  // returning resumes uc_link, the scheduler
}
#endif

/** Per worker: fiber stacks (each with a guard page below it) reused across blocks. */
struct Stacks {
  std::vector<char*> mem;
  ~Stacks() {
    for (char* p : mem) munmap(p, kStackBytes + static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  }
  bool ensure(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    while (mem.size() < n) {
      void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return false;
      mprotect(p, page, PROT_NONE);  // an overflowing fiber faults instead of corrupting its neighbour
      mem.push_back(static_cast<char*>(p));
    }
    return true;
  }
  char* top(size_t i) const { return mem[i] + static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
};

void run_block_fibers(Job& job, unsigned bid, Stacks& stacks, std::vector<unsigned char>& smem) {
  const unsigned n = job.block.x;
  if (!stacks.ensure(n)) {
    job.fail(cudaErrorMemoryAllocation, "cannot map fiber stacks");
    return;
  }
  FiberBlock fb;
  fb.job = &job;
  fb.fibers.resize(n);
  // Uninitialised shared memory reads as NaN, so a kernel that reads before writing shows it.
  smem.assign(job.smem, 0xff);
  for (unsigned i = 0; i < n; i++) {
    Fiber& f = fb.fibers[i];
    f.tc = ThreadCtx{{i, 0, 0}, {bid, 0, 0}, job.block, job.grid, smem.data()};
    f.state = kRunnable;
    f.file = nullptr;
    f.line = 0;
#if NLK_FAST_SWITCH
    f.sp = fiber_frame(stacks.top(i) + kStackBytes, &f);
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stacks.top(i);
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = &fb.sched;
    const uintptr_t p = reinterpret_cast<uintptr_t>(&f);
    makecontext(&f.ctx, reinterpret_cast<void (*)()>(fiber_entry), 2, static_cast<unsigned>(p & 0xffffffffu),
                static_cast<unsigned>(p >> 32));
#endif
  }
  tls_fiber_block = &fb;
  for (;;) {
    for (unsigned k = 0; k < n; k++) {
      Fiber& f = fb.fibers[job.reversed ? n - 1 - k : k];
      if (f.state != kRunnable) continue;
      fb.cur = &f;
      tls_ctx = &f.tc;
#if NLK_FAST_SWITCH
      nlk_emu_switch(&fb.sched, f.sp);
#else
      swapcontext(&fb.sched, &f.ctx);
#endif
    }
    tls_ctx = nullptr;
    unsigned done = 0;
    const Fiber* first = nullptr;
    const Fiber* other = nullptr;
    for (const Fiber& f : fb.fibers) {
      if (f.state == kDone) {
        done++;
        continue;
      }
      if (first == nullptr) first = &f;
      else if (other == nullptr && (f.line != first->line || strcmp(f.file, first->file) != 0)) other = &f;
    }
    if (done == n) break;
    const std::string where = "block " + std::to_string(bid) + ": ";
    if (done > 0) {
      job.fail(NLK_ERR_EMU_SYNC_EXITED, where + "__syncthreads() at " + site(first->file, first->line) + " reached by thread " +
                                            std::to_string(first->tc.tid.x) + " after " + std::to_string(done) +
                                            " thread(s) of the block returned");
      break;
    }
    if (other != nullptr) {
      job.fail(NLK_ERR_EMU_SYNC_DIVERGENT, where + "__syncthreads() reached from different call sites: " + site(first->file, first->line) +
                                               " (thread " + std::to_string(first->tc.tid.x) + ") and " + site(other->file, other->line) +
                                               " (thread " + std::to_string(other->tc.tid.x) + ")");
      break;
    }
    for (Fiber& f : fb.fibers) f.state = kRunnable;
  }
  tls_fiber_block = nullptr;
}

// ── thread mode ──────────────────────────────────────────────────────────────────────────

struct Abandon {};

struct ThreadBlock {
  Job* job;
  unsigned bid;
  unsigned n;
  std::mutex mu;
  std::condition_variable cv;
  unsigned arrived = 0, exited = 0;
  uint64_t generation = 0;
  const char* file = nullptr;
  int line = 0;
  unsigned first_tid = 0;
  bool abandoned = false;

  void fail(int code, const std::string& what) {
    job->fail(code, "block " + std::to_string(bid) + ": " + what);
    abandoned = true;
    cv.notify_all();
  }

  /** Called with mu held whenever arrivals or exits change: opens the barrier or reports misuse. */
  void settle() {
    if (arrived == 0 || arrived + exited < n) return;
    if (exited > 0) {
      fail(NLK_ERR_EMU_SYNC_EXITED, "__syncthreads() at " + site(file, line) + " reached after " + std::to_string(exited) +
                                        " thread(s) of the block returned");
      return;
    }
    arrived = 0;
    file = nullptr;
    generation++;
    cv.notify_all();
  }
};

thread_local ThreadBlock* tls_thread_block = nullptr;

void thread_sync(ThreadBlock& tb, const char* file, int line) {
  std::unique_lock<std::mutex> lk(tb.mu);
  if (tb.abandoned) throw Abandon{};
  if (tb.file == nullptr) {
    tb.file = file;
    tb.line = line;
    tb.first_tid = tls_ctx->tid.x;
  } else if (tb.line != line || strcmp(tb.file, file) != 0) {
    tb.fail(NLK_ERR_EMU_SYNC_DIVERGENT, "__syncthreads() reached from different call sites: " + site(tb.file, tb.line) +
                                            " (thread " + std::to_string(tb.first_tid) + ") and " + site(file, line) + " (thread " +
                                            std::to_string(tls_ctx->tid.x) + ")");
    throw Abandon{};
  }
  const uint64_t gen = tb.generation;
  tb.arrived++;
  tb.settle();
  tb.cv.wait(lk, [&] { return tb.abandoned || tb.generation != gen; });
  if (tb.abandoned) throw Abandon{};
}

void run_block_threads(Job& job, unsigned bid) {
  const unsigned n = job.block.x;
  ThreadBlock tb;
  tb.job = &job;
  tb.bid = bid;
  tb.n = n;
  std::vector<unsigned char> smem(job.smem, 0xff);
  std::vector<ThreadCtx> ctxs(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (unsigned i = 0; i < n; i++) {
    ctxs[i] = ThreadCtx{{i, 0, 0}, {bid, 0, 0}, job.block, job.grid, smem.data()};
    threads.emplace_back([&, i] {
      tls_ctx = &ctxs[i];
      tls_thread_block = &tb;
      try {
        job.body(job.closure);
      } catch (Abandon&) {
      }
      std::lock_guard<std::mutex> lk(tb.mu);
      tb.exited++;
      tb.settle();
    });
  }
  for (std::thread& t : threads) t.join();
}

// ── the worker pool ──────────────────────────────────────────────────────────────────────

class Pool {
 public:
  Pool() {
    unsigned n = std::thread::hardware_concurrency();
    if (const char* e = getenv("NLK_EMU_WORKERS")) n = static_cast<unsigned>(atoi(e));
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    for (unsigned i = 0; i < n; i++) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  unsigned size() const { return static_cast<unsigned>(workers_.size()); }

  void run(Job& job) {
    std::lock_guard<std::mutex> one(launch_mu_);
    std::unique_lock<std::mutex> lk(mu_);
    job_ = &job;
    busy_ = size();
    generation_++;
    work_cv_.notify_all();
    done_cv_.wait(lk, [this] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop() {
    Stacks stacks;
    std::vector<unsigned char> smem;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      work_cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      Job* job = job_;
      lk.unlock();
      const unsigned blocks = job->grid.x;
      for (unsigned i; (i = job->next.fetch_add(1)) < blocks;) {
        const unsigned bid = job->reversed ? blocks - 1 - i : i;
        if (mode() == 1) run_block_threads(*job, bid);
        else run_block_fibers(*job, bid, stacks, smem);
      }
      lk.lock();
      if (--busy_ == 0) done_cv_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex launch_mu_, mu_;
  std::condition_variable work_cv_, done_cv_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  unsigned busy_ = 0;
  bool quit_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int block_policy() { return g_block_policy.load(); }

void sync_threads(const char* file, int line) {
  if (FiberBlock* fb = tls_fiber_block) {
    Fiber* f = fb->cur;
    f->state = kParked;
    f->file = file;
    f->line = line;
#if NLK_FAST_SWITCH
    nlk_emu_switch(&f->sp, fb->sched);
#else
    swapcontext(&f->ctx, &fb->sched);
#endif
    return;
  }
  if (ThreadBlock* tb = tls_thread_block) thread_sync(*tb, file, line);
  // outside a kernel: nothing to wait for
}

void launch(dim3 grid, dim3 block, size_t smem, const char* name, Body body, void* closure) {
  if (grid.x == 0 || grid.y != 1 || grid.z != 1 || block.x == 0 || block.x > kMaxThreads || block.y != 1 || block.z != 1) {
    tls_last_error = cudaErrorInvalidConfiguration;
    set_detail(std::string(name) + ": invalid launch configuration (grid " + std::to_string(grid.x) + ", block " +
               std::to_string(block.x) + "; only 1-D grids and blocks of 1..1024 threads)");
    return;
  }
  if (smem > kMaxSharedBytes) {
    tls_last_error = cudaErrorInvalidValue;
    set_detail(std::string(name) + ": " + std::to_string(smem) + " bytes of dynamic shared memory (limit 48 KiB)");
    return;
  }
  Job job;
  job.grid = grid;
  job.block = block;
  job.smem = smem;
  job.name = name;
  job.body = body;
  job.closure = closure;
  job.reversed = g_order_reversed.load() != 0;
  pool().run(job);
  if (job.error != 0 && tls_last_error == 0) tls_last_error = job.error;
}

}  // namespace nlk_emu

// ── emulated CUDA runtime ────────────────────────────────────────────────────────────────

struct nlk_emu_event {
  std::chrono::steady_clock::time_point at;
};

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = malloc(bytes == 0 ? 1 : bytes);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  // Fresh device memory reads as NaN: an output a kernel forgets to write cannot pass as 0.
  memset(*p, 0xff, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes != 0) memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes != 0) memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  const int e = nlk_emu::tls_last_error;
  nlk_emu::tls_last_error = 0;
  return e;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "emulation error";
  }
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new nlk_emu_event{};
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, int) {
  e->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}

// ── emulation controls (nlk.h, cpu-emu only) ─────────────────────────────────────────────

extern "C" {

NLK_API int nlk_emu_set_order(int reversed) {
  nlk_emu::g_order_reversed.store(reversed != 0);
  return 0;
}

NLK_API int nlk_emu_set_mode(int threads) {
  if (threads != 0 && threads != 1) return NLK_ERR_BAD_HYPER;
#ifdef NLK_TSAN
  if (threads == 0) return NLK_ERR_BAD_HYPER;
#endif
  nlk_emu::g_mode.store(threads);
  return 0;
}

NLK_API int nlk_emu_set_block_policy(int gpu_sized) {
  if (gpu_sized != 0 && gpu_sized != 1) return NLK_ERR_BAD_HYPER;
  nlk_emu::g_block_policy.store(gpu_sized);
  return 0;
}

NLK_API int nlk_emu_workers(void) { return static_cast<int>(nlk_emu::pool().size()); }

NLK_API const char* nlk_emu_error_detail(void) {
  // The string outlives the call: it is only replaced by a later failing launch.
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lk(nlk_emu::g_detail_mu);
  copy = nlk_emu::g_detail;
  return copy.c_str();
}

}  // extern "C"
