#include <immintrin.h>

#include "tools/cact-run/bench/machine_dot_loop.h"
#include "tools/cact-run/bench/machine_table.h"

namespace cact::kernels::internal {

uint64_t DotLoopAvxVnni(uint64_t iters) {
  return DotLoop(
      iters, _mm256_setzero_si256(), _mm256_set1_epi8(3), _mm256_set1_epi8(-2),
      [](__m256i acc, __m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(acc, w, x); },
      [](__m256i a, __m256i b) { return _mm256_add_epi32(a, b); },
      [](__m256i s) {
        volatile int32_t keep = _mm256_extract_epi32(s, 0);
        (void)keep;
      });
}

}  // namespace cact::kernels::internal
