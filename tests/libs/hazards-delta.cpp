// Hazards the reference comparison alone does not see (tests/hazards-lib-planted.test.ts,
// docs/spec/hazards.md): the Delta example library (examples/delta-cpu/delta.cpp) with one hazard
// planted by a macro into its forward; every build computes the right y and final state.
//   -DPLANT_READ_PAST   for a key size d that is not a power of two, the last (token, head)'s gate is
//                       loaded as a block of two lanes, the second unmasked (one element past the end
//                       of alpha), and multiplied by the padded lane's key, 0
//   -DPLANT_WRITE_INPUT theta[0] halved after the last read (the input used as scratch)
//   -DPLANT_WRITE_PAST  one element written after the end of y
//   -DPLANT_UNWRITTEN   the last element of y never written
//   -DPLANT_NONDET      y[0] moved by one ulp per call after the first (a sum whose order changes)
//   -DPLANT_NONDET_DECLARED  y[0] one ulp up or down, alternating call by call, and the library
//                       declares it (nlk_nondeterminism: a relative tolerance of 1e-5)
// Without one it is the example (the control).
// Build: g++ -std=c++17 -O2 -shared -fPIC -I../../ffi -DPLANT_READ_PAST -o libhazard_read_past.so hazards-delta.cpp
#include <cmath>
#include <vector>
#define nlk_delta_forward nlk_delta_forward_example
#include "../../examples/delta-cpu/delta.cpp"
#undef nlk_delta_forward

extern "C" {
NLK_API int nlk_delta_forward(int B, int T, int H, int d, int C, const float* k, const float* v, const float* q,
                              const float* alpha, const float* theta, const float* M_0, float* y, float* M, void* ws) {
  const size_t gates = size_t(B) * T * H, ys = gates * d;
  (void)ys;
#ifdef PLANT_READ_PAST
  std::vector<float> a(alpha, alpha + gates);
  if (d & (d - 1)) a[gates - 1] = a[gates - 1] + 0.0f * alpha[gates];
  alpha = a.data();
#endif
#ifdef PLANT_UNWRITTEN
  std::vector<float> full(ys);
  float* out = full.data();
#else
  float* out = y;
#endif
  if (int st = nlk_delta_forward_example(B, T, H, d, C, k, v, q, alpha, theta, M_0, out, M, ws)) return st;
#ifdef PLANT_UNWRITTEN
  std::memcpy(y, out, (ys - 1) * sizeof(float));
#endif
#ifdef PLANT_WRITE_INPUT
  const_cast<float*>(theta)[0] *= 0.5f;
#endif
#ifdef PLANT_WRITE_PAST
  y[ys] = 0.0f;
#endif
#ifdef PLANT_NONDET
  static int calls = 0;
  for (int i = 0; i < calls; i++) y[0] = std::nextafter(y[0], INFINITY);
  calls++;
#endif
#ifdef PLANT_NONDET_DECLARED
  static int flips = 0;
  y[0] = std::nextafter(y[0], (flips++ & 1) ? INFINITY : -INFINITY);
#endif
  return NLK_OK;
}

#ifdef PLANT_NONDET_DECLARED
NLK_API int nlk_nondeterminism(const char* fn, double* tolerance) {
  (void)fn;
  *tolerance = 1e-5;
  return NLK_OK;
}
#endif
}  // extern "C"
