// Bugs that only show at scale (tests/regime-planted.test.ts): the Delta example library
// (examples/delta-cpu/delta.cpp) run as a chunked kernel — it declares an exact chunk form with
// chunks of 16 tokens (nlk_delta_chunk_form), and its forward hands the state from chunk to chunk
// — with one bug planted by a macro. Without one it is correct (the control).
//   -DPLANT_HANDOFF   the state handed to the next chunk scaled by 1 + 1/128
//   -DPLANT_TILE      y ignores the second tile (columns 64..d) of the head dimension when d > 64
//   -DPLANT_STRIDE    with H > 8 heads, the gates are read with a head stride of 8
//   -DPLANT_MOD8      with H > 8 heads, the gate index takes the head modulo 8 (head 8 reads head 0's gates)
//   -DPLANT_PARTIAL   the last partial chunk dropped (T > 16 not a multiple of 16: its tokens neither
//                     update the state nor produce y)
//   -DPLANT_SATURATED in the last partial chunk, the decay 1 − alpha_t taken from cumulative logs as
//                     exp(L_t) · exp(−L_{t−1}): right for alpha < 1, 0 · inf = NaN after two tokens of
//                     alpha = 1 (saturated gates: tests/edges-lib-planted.test.ts)
// The backward is the example's: the bugs are in the forward, which the forward check judges.
// Two more builds export the pair's variants (docs/spec/kernel-abi.md#variants: nlk_delta_variants,
// nlk_delta_set_variant), "scalar" (variant 0, the library's own choice) and "tiled" (variant 1),
// which compute the same values unless planted (tests/variants-lib-planted.test.ts):
//   -DPLANT_VARIANTS      both variants right (the control)
//   -DPLANT_VARIANT_GRAD  under "tiled" pinned, the backward's dk scaled by 1 + 1/128
//   -DPLANT_VARIANTS_HALF the variants listed, but nlk_delta_set_variant not exported (a declaration C5 cannot judge)
// Build: g++ -std=c++17 -O2 -shared -fPIC -I../../ffi -DPLANT_HANDOFF -o libplanted_handoff.so planted-delta.cpp
#include <cmath>
#include <cstdio>
#if (defined(PLANT_VARIANT_GRAD) || defined(PLANT_VARIANTS_HALF)) && !defined(PLANT_VARIANTS)
#define PLANT_VARIANTS
#endif
#define nlk_delta_forward nlk_delta_forward_example
#ifdef PLANT_VARIANTS
#define nlk_delta_backward nlk_delta_backward_example
#endif
#include "../../examples/delta-cpu/delta.cpp"
#undef nlk_delta_forward
#undef nlk_delta_backward

namespace {
constexpr int CHUNK = 16;
constexpr int TILE = 64;
}  // namespace

extern "C" {
NLK_API int nlk_delta_chunk_form(int* kind, int* C) {
  *kind = NLK_CHUNK_EXACT;
  *C = CHUNK;
  return NLK_OK;
}

NLK_API int nlk_delta_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
                              const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* ws) {
  size_t bytes;
  if (int st = nlk_delta_workspace_bytes(B, T, H, d, C, &bytes)) return st;
  if (!k || !v || !q || !alpha || !theta || !M_0 || !y || !M || !ws) return NLK_ERR_NULL_POINTER;
  const Dims s{B, T, H, d};
  const size_t dd = size_t(d) * d, per = bytes / (size_t(B) * H);
  (void)per;
  int done = T;  // tokens run
#ifdef PLANT_PARTIAL
  if (T > CHUNK && T % CHUNK != 0) done = (T / CHUNK) * CHUNK;
#endif
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      char* w = static_cast<char*>(ws) + (size_t(b) * H + h) * per;
      float* ck = reinterpret_cast<float*>(w);
      std::vector<float> cur(M_0 + (size_t(b) * H + h) * dd, M_0 + (size_t(b) * H + h + 1) * dd), next(dd), e(d);
      double logs = 0;  // PLANT_SATURATED: the partial chunk's cumulative log decay
      (void)logs;
      for (int t = 0; t < T; t++) {
        const size_t o = vec(s, b, t, h);
        size_t g = gate(s, b, t, h);
#ifdef PLANT_STRIDE
        if (H > 8) g = (size_t(b) * T + t) * 8 + h;
#endif
#ifdef PLANT_MOD8
        if (H > 8) g = gate(s, b, t, h % 8);
#endif
        if (t >= done) {
          for (int i = 0; i < d; i++) y[o + i] = 0.0f;
          continue;
        }
        float a = alpha[g];
#ifdef PLANT_SATURATED
        if (T % CHUNK != 0 && t >= (T / CHUNK) * CHUNK) {
          const double before = logs;
          logs += std::log(1.0 - double(alpha[g]));
          a = float(1.0 - std::exp(logs) * std::exp(-before));
        }
#endif
        step(cur.data(), next.data(), k + o, v + o, a, theta[g], d, e.data());
        int cols = d;
#ifdef PLANT_TILE
        if (d > TILE) cols = TILE;
#endif
        for (int i = 0; i < d; i++) {
          double r = 0;
          for (int j = 0; j < cols; j++) r += double(next[i * d + j]) * q[o + j];
          y[o + i] = float(r);
        }
        cur.swap(next);
#ifdef PLANT_HANDOFF
        if ((t + 1) % CHUNK == 0 && t + 1 < T)
          for (size_t i = 0; i < dd; i++) cur[i] = float(cur[i] * (1.0 + 1.0 / 128));
#endif
        if ((t + 1) % C == 0 && t + 1 < T) std::memcpy(ck + ((t + 1) / C - 1) * dd, cur.data(), dd * 4);
      }
      std::memcpy(M + (size_t(b) * H + h) * dd, cur.data(), dd * 4);
    }
  (void)TILE;
  return NLK_OK;
}
}  // extern "C"

#ifdef PLANT_VARIANTS
namespace {
const char* const VARIANTS[] = {"scalar", "tiled"};
constexpr int N_VARIANTS = 2;
int pinned = -1;  // -1: the library's own choice (variant 0 at every shape)
}  // namespace

extern "C" {
NLK_API int nlk_delta_variants(int index, char* name, int cap) {
  if (name != nullptr && cap > 0 && index >= 0 && index < N_VARIANTS) std::snprintf(name, size_t(cap), "%s", VARIANTS[index]);
  return N_VARIANTS;
}

#ifndef PLANT_VARIANTS_HALF
NLK_API int nlk_delta_set_variant(int index) {
  if (index < -1 || index >= N_VARIANTS) return NLK_ERR_UNSUPPORTED;
  pinned = index;
  return NLK_OK;
}
#endif

NLK_API int nlk_delta_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
                               const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
                               void* ws, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0) {
  const int st = nlk_delta_backward_example(B, T, H, d, C, k, v, q, alpha, theta, M_0, dy, dM, ws, dk, dv, dq, dalpha, dtheta, dM_0);
#ifdef PLANT_VARIANT_GRAD
  if (st == NLK_OK && pinned == 1)
    for (size_t i = 0, n = size_t(B) * T * H * d; i < n; i++) dk[i] = float(dk[i] * (1.0 + 1.0 / 128));
#endif
  return st;
}
}  // extern "C"
#endif
