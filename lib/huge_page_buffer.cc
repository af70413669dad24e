#include "lib/huge_page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

namespace cact {

std::shared_ptr<uint8_t> AllocateHugePageBuffer(size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) / page * page;
  if (len == 0) return nullptr;
  // Map a huge page more than needed, then unmap the ends outside the aligned range.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t lo = uintptr_t(raw), start = (lo + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = start + len, raw_end = lo + len + kHuge;
  if (start > lo) munmap(raw, start - lo);
  if (raw_end > end) munmap(reinterpret_cast<void*>(end), raw_end - end);
  madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);  // advice: may be refused
  return std::shared_ptr<uint8_t>(reinterpret_cast<uint8_t*>(start),
                                  [len](uint8_t* p) { munmap(p, len); });
}

}  // namespace cact
