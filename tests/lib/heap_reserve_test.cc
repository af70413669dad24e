// ReserveHugePageHeap: the heap grows once by the reservation, later large arrays are carved
// from it, and small reservations do nothing. Under the sanitizers (their own allocator, no
// brk heap) it must report that it did nothing.
#include "lib/heap_reserve.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace cact {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif

TEST(HeapReserve, LargeArraysComeFromTheReservedRange) {
  EXPECT_EQ(ReserveHugePageHeap(size_t{1} << 20), 0u);  // under 64 MiB: nothing to do
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  const size_t marked = ReserveHugePageHeap(size_t{128} << 20);
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  if (!kGlibcHeap) {
    EXPECT_EQ(marked, 0u);
    return;
  }
  EXPECT_GE(after - before, size_t{128} << 20);
  EXPECT_GE(marked, size_t{120} << 20);         // the range, cut to whole 2 MiB pages
  std::vector<float> w(size_t{4} << 20, 1.0f);  // 16 MiB: once its own mmap, now heap
  const auto p = reinterpret_cast<uintptr_t>(w.data());
  EXPECT_GE(p + (size_t{2} << 20), before);  // the old top chunk may extend the new range
  EXPECT_LT(p + w.size() * sizeof(float), after);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sbrk(0)), after);  // no further growth
}

}  // namespace
}  // namespace cact
