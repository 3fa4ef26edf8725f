// A kernel library whose backward segfaults (tests/child-process.test.ts): the Delta example
// library (examples/delta-cpu/delta.cpp) with nlk_delta_backward replaced by a null write. Every
// other function is the example's, so its forward-only checks pass and the rules it does not
// export are skipped; only the checks that call the backward lose their process.
// Build: g++ -std=c++17 -O0 -shared -fPIC -I../../ffi -o libcrash_backward.so crash-backward.cpp
#define nlk_delta_backward nlk_delta_backward_example
#include "../../examples/delta-cpu/delta.cpp"
#undef nlk_delta_backward

extern "C" NLK_API int nlk_delta_backward(int, int, int, int, int, const float*, const float*, const float*, const float*,
                                          const float*, const float*, const float*, const float*, void*, float*, float*,
                                          float*, float*, float*, float*) {
  *static_cast<volatile int*>(nullptr) = 1;
  return NLK_OK;
}
