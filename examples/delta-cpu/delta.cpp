// An external kernel library for nl-conformance: the Delta rule on the CPU, plain C++ (ABI v2,
// ffi/nlk.h; contract docs/spec/kernel-abi.md). It implements one rule; C5 skips the others.
//   e_t = M_t k_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
// Checkpointing, its own way: the forward keeps M after every C-th token; the backward rebuilds
// M_t from the chunk's checkpoint for every token (O(C) steps each), so its scratch is two states.
// Build: g++ -std=c++17 -O2 -shared -fPIC -I../../ffi -o libdelta_example.so delta.cpp
#include "nlk.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
struct Dims { int B, T, H, d; };
size_t vec(const Dims& s, int b, int t, int h) { return ((size_t(b) * s.T + t) * s.H + h) * s.d; }
size_t gate(const Dims& s, int b, int t, int h) { return (size_t(b) * s.T + t) * s.H + h; }
int checkpoints(int T, int C) { return (T - 1) / C; }  // states kept after tokens C, 2C, … < T

// One token: Mn = (1 − α) M − θ e kᵀ with e = M k − v (rounded to f32 where the reference stores).
void step(const float* M, float* Mn, const float* k, const float* v, float alpha, float theta, int d, float* e) {
  for (int i = 0; i < d; i++) {
    double pred = 0;
    for (int j = 0; j < d; j++) pred += double(M[i * d + j]) * k[j];
    e[i] = float(double(float(pred)) - v[i]);
    for (int j = 0; j < d; j++) Mn[i * d + j] = float(double(float((1.0 - alpha) * M[i * d + j])) - double(theta) * e[i] * k[j]);
  }
}
}  // namespace

extern "C" {
NLK_API int nlk_abi_version(void) { return NLK_ABI_VERSION; }
NLK_API const char* nlk_backend_name(void) { return "delta-cpu-example"; }
NLK_API int nlk_device_info(char* name, int cap) {
  if (name == nullptr || cap < 1) return NLK_ERR_NULL_POINTER;
  std::strncpy(name, "host CPU (plain C++)", size_t(cap) - 1);
  name[cap - 1] = '\0';
  return NLK_OK;
}
NLK_API double nlk_device_peak_gbps(void) { return 0.0; }
NLK_API double nlk_last_kernel_ms(void) { return 0.0; }
NLK_API const char* nlk_status_string(int s) { return s == 0 ? "ok" : "error"; }
NLK_API int nlk_dtypes(const char*, int* storage, int* state, int* acc) {
  *storage = NLK_DTYPE_F32; *state = NLK_DTYPE_F32; *acc = NLK_DTYPE_F64;
  return NLK_OK;
}
NLK_API int nlk_alloc(size_t bytes, void** out) {
  *out = std::malloc(bytes == 0 ? 1 : bytes);
  return *out == nullptr ? NLK_ERR_BAD_SIZE : NLK_OK;
}
NLK_API int nlk_free(void* p) { std::free(p); return NLK_OK; }
NLK_API int nlk_copy_in(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); return NLK_OK; }
NLK_API int nlk_copy_out(void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); return NLK_OK; }
NLK_API int nlk_synchronize(void) { return NLK_OK; }

// Workspace: per sequence, the checkpoints (f32), then scratch: two states (f32), the adjoint (f64), e.
NLK_API int nlk_delta_workspace_bytes(int B, int T, int H, int d, int C, size_t* bytes) {
  if (B < 1 || T < 1 || H < 1 || d < 1 || C < 1) return NLK_ERR_BAD_SIZE;
  const size_t dd = size_t(d) * d;
  *bytes = size_t(B) * H * ((checkpoints(T, C) + 2) * dd * 4 + dd * 8 + size_t(d) * 4);
  return NLK_OK;
}

NLK_API int nlk_delta_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
                              const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* ws) {
  size_t bytes;
  if (int st = nlk_delta_workspace_bytes(B, T, H, d, C, &bytes)) return st;
  if (!k || !v || !q || !alpha || !theta || !M_0 || !y || !M || !ws) return NLK_ERR_NULL_POINTER;
  const Dims s{B, T, H, d};
  const size_t dd = size_t(d) * d, per = bytes / (size_t(B) * H);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      char* w = static_cast<char*>(ws) + (size_t(b) * H + h) * per;
      float* ck = reinterpret_cast<float*>(w);
      std::vector<float> cur(M_0 + (size_t(b) * H + h) * dd, M_0 + (size_t(b) * H + h + 1) * dd), next(dd), e(d);
      for (int t = 0; t < T; t++) {
        const size_t o = vec(s, b, t, h), g = gate(s, b, t, h);
        step(cur.data(), next.data(), k + o, v + o, alpha[g], theta[g], d, e.data());
        for (int i = 0; i < d; i++) {
          double r = 0;
          for (int j = 0; j < d; j++) r += double(next[i * d + j]) * q[o + j];
          y[o + i] = float(r);
        }
        cur.swap(next);
        if ((t + 1) % C == 0 && t + 1 < T) std::memcpy(ck + ((t + 1) / C - 1) * dd, cur.data(), dd * 4);
      }
      std::memcpy(M + (size_t(b) * H + h) * dd, cur.data(), dd * 4);
    }
  return NLK_OK;
}

NLK_API int nlk_delta_backward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
                               const float* alpha, const float* theta, const float* M_0, const float* dy, const float* dM,
                               void* ws, float* dk, float* dv, float* dq, float* dalpha, float* dtheta, float* dM_0) {
  size_t bytes;
  if (int st = nlk_delta_workspace_bytes(B, T, H, d, C, &bytes)) return st;
  if (!k || !v || !q || !alpha || !theta || !M_0 || !ws || !dk || !dv || !dq || !dalpha || !dtheta || !dM_0) return NLK_ERR_NULL_POINTER;
  const Dims s{B, T, H, d};
  const size_t dd = size_t(d) * d, per = bytes / (size_t(B) * H), nck = checkpoints(T, C);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const size_t n = size_t(b) * H + h;
      char* w = static_cast<char*>(ws) + n * per;
      const float* ck = reinterpret_cast<const float*>(w);
      float* Mt = reinterpret_cast<float*>(w) + nck * dd;  // scratch after the checkpoints
      float* Mn = Mt + dd;
      double* D = reinterpret_cast<double*>(Mn + dd);     // ∂L/∂M_{t+1}
      float* e = reinterpret_cast<float*>(D + dd);
      for (size_t i = 0; i < dd; i++) D[i] = dM ? dM[n * dd + i] : 0.0;
      std::vector<double> de(d);
      for (int t = T - 1; t >= 0; t--) {
        // rebuild M_t from the chunk's start, then M_{t+1} and e_t
        const int c0 = (t / C) * C;
        std::memcpy(Mt, c0 == 0 ? M_0 + n * dd : ck + (c0 / C - 1) * dd, dd * 4);
        for (int u = c0; u < t; u++) {
          step(Mt, Mn, k + vec(s, b, u, h), v + vec(s, b, u, h), alpha[gate(s, b, u, h)], theta[gate(s, b, u, h)], d, e);
          std::memcpy(Mt, Mn, dd * 4);
        }
        const size_t o = vec(s, b, t, h), g = gate(s, b, t, h);
        step(Mt, Mn, k + o, v + o, alpha[g], theta[g], d, e);
        const double th = theta[g];
        double pa = 0, pth = 0;
        for (int i = 0; i < d; i++) {
          const double dyi = dy ? dy[o + i] : 0.0;
          double dki = 0;
          for (int j = 0; j < d; j++) {
            D[i * d + j] += dyi * q[o + j];
            pa += D[i * d + j] * Mt[i * d + j];
            dki += D[i * d + j] * k[o + j];
          }
          pth += e[i] * dki;
          de[i] = -th * dki;
          dv[o + i] = float(-de[i]);
        }
        for (int j = 0; j < d; j++) {
          double gq = 0, ge = 0, gm = 0;
          for (int i = 0; i < d; i++) {
            gq += Mn[i * d + j] * (dy ? double(dy[o + i]) : 0.0);
            ge += D[i * d + j] * e[i];
            gm += Mt[i * d + j] * de[i];
          }
          dq[o + j] = float(gq);
          dk[o + j] = float(-th * ge + gm);
        }
        dalpha[g] = float(-pa);
        dtheta[g] = float(-pth);
        for (int i = 0; i < d; i++)
          for (int j = 0; j < d; j++) D[i * d + j] = (1.0 - alpha[g]) * D[i * d + j] + de[i] * k[o + j];
      }
      for (size_t i = 0; i < dd; i++) dM_0[n * dd + i] = float(D[i]);
    }
  return NLK_OK;
}
}  // extern "C"
