// The shape the per-ISA dot loops share: 8 independent accumulators each updated `iters`
// times by `step` (one dot instruction), then summed by `add` and handed to `keep` so that
// nothing is elided. Returns the multiply-adds done (one per byte of a vector per step).
// Included only by the per-ISA files (built with their ISA's flags); each instantiates it
// with its own lambdas, so no instantiation is shared between files.
#pragma once
#include <cstdint>

namespace cact::kernels::internal {

template <typename Vec, typename Step, typename Add, typename Keep>
uint64_t DotLoop(uint64_t iters, Vec zero, Vec w, Vec x, Step step, Add add, Keep keep) {
  Vec acc[8];
  for (auto& a : acc) a = zero;
  for (uint64_t i = 0; i < iters; ++i) {
    // A new w for every step: otherwise the parts of a step that do not read the
    // accumulator (AVX2's maddubs + madd) are computed once per round and shared.
    for (int k = 0; k < 8; ++k) {
      acc[k] = step(acc[k], w, x);
      __asm__ volatile("" : "+v"(w));
    }
  }
  Vec sum = acc[0];
  for (int k = 1; k < 8; ++k) sum = add(sum, acc[k]);
  keep(sum);
  return iters * 8 * sizeof(Vec);
}

}  // namespace cact::kernels::internal
