#include <immintrin.h>

#include "tools/cact-run/bench/machine_dot_loop.h"
#include "tools/cact-run/bench/machine_table.h"

namespace cact::kernels::internal {

// maddubs + madd + add: what the AVX2 kernel does per 32 multiply-adds.
uint64_t DotLoopAvx2(uint64_t iters) {
  const __m256i one = _mm256_set1_epi16(1);
  return DotLoop(
      iters, _mm256_setzero_si256(), _mm256_set1_epi8(3), _mm256_set1_epi8(-2),
      [one](__m256i acc, __m256i w, __m256i x) {
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), one));
      },
      [](__m256i a, __m256i b) { return _mm256_add_epi32(a, b); },
      [](__m256i s) {
        volatile int32_t keep = _mm256_extract_epi32(s, 0);
        (void)keep;
      });
}

}  // namespace cact::kernels::internal
