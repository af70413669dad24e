#include <immintrin.h>

#include "tools/cact-run/bench/machine_table.h"

namespace cact::kernels::internal {

// maddubs + madd + add: what the AVX2 kernel does per 32 multiply-adds.
uint64_t DotLoopAvx2(uint64_t iters) {
  __m256i acc[8];
  for (auto& x : acc) x = _mm256_setzero_si256();
  __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  for (uint64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 8; ++k)
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), one));
    __asm__ volatile("" : "+x"(w));
  }
  __m256i s = acc[0];
  for (int k = 1; k < 8; ++k) s = _mm256_add_epi32(s, acc[k]);
  volatile int32_t keep = _mm256_extract_epi32(s, 0);  // keeps every accumulator live
  (void)keep;
  return iters * 8 * 32;
}

}  // namespace cact::kernels::internal
