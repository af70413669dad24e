// AllocateHugePageBuffer: zeroed, writable, starting on a 2 MiB boundary, for sizes that are
// not whole pages; nothing for zero bytes; owners share it.
#include "lib/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace cact {
namespace {

TEST(HugePageBuffer, ZeroedWritableAndAlignedToTwoMiB) {
  for (size_t bytes : {size_t{1}, size_t{4097}, (size_t{5} << 20) + 321}) {
    std::shared_ptr<uint8_t> b = AllocateHugePageBuffer(bytes);
    ASSERT_NE(b, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % (uintptr_t{2} << 20), 0u) << bytes;
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes; ++i) sum += b.get()[i];
    EXPECT_EQ(sum, 0u) << bytes;
    for (size_t i = 0; i < bytes; ++i) b.get()[i] = uint8_t(i * 7);
    std::shared_ptr<uint8_t> other = b;
    b.reset();
    EXPECT_EQ(other.get()[bytes - 1], uint8_t((bytes - 1) * 7)) << bytes;
  }
  EXPECT_EQ(AllocateHugePageBuffer(0), nullptr);
}

}  // namespace
}  // namespace cact
