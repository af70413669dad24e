// GCC 12 false positive inside the AVX-512 intrinsics headers (_mm512_undefined_*).
#if !defined(__clang__)  // clang has no such warning, and warns about the pragma
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "tools/cact-run/bench/machine_dot_loop.h"
#include "tools/cact-run/bench/machine_table.h"

namespace cact::kernels::internal {

uint64_t ReadPassAvx512(const uint8_t* p, size_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(p + i + 192));
  }
  a = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return uint64_t(_mm512_reduce_add_epi64(a)) + i;
}

uint64_t DotLoopAvx512(uint64_t iters) {
  return DotLoop(
      iters, _mm512_setzero_si512(), _mm512_set1_epi8(3), _mm512_set1_epi8(-2),
      [](__m512i acc, __m512i w, __m512i x) { return _mm512_dpbusd_epi32(acc, w, x); },
      [](__m512i a, __m512i b) { return _mm512_add_epi32(a, b); },
      [](__m512i s) {
        volatile int32_t keep = _mm512_reduce_add_epi32(s);
        (void)keep;
      });
}

}  // namespace cact::kernels::internal
