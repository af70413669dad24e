#include "lib/heap_reserve.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace cact {

size_t ReserveHugePageHeap(size_t bytes) {
  constexpr size_t kMin = size_t{64} << 20, kHuge = size_t{2} << 20;
  constexpr int kMmapThreshold = 32 << 20;  // glibc's ceiling for M_MMAP_THRESHOLD
  if (bytes < kMin) return 0;
  const int pad = int(std::min<size_t>(bytes, INT_MAX / 2));
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, 2 * pad);
  mallopt(M_TOP_PAD, pad);
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  // A block the current top cannot hold makes the heap grow by the pad (volatile: an unused
  // malloc/free pair may otherwise be optimized away).
  void* volatile probe = std::malloc(kHuge);
  std::free(probe);
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  mallopt(M_TOP_PAD, 0);
  const uintptr_t lo = (before + kHuge - 1) & ~(kHuge - 1), hi = after & ~(kHuge - 1);
  if (before == uintptr_t(-1) || hi <= lo) return 0;
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) return 0;
  return hi - lo;
}

}  // namespace cact
