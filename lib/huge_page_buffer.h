// One anonymous buffer for data a program reads all the time (the fast path's code tiles):
// it starts on a 2 MiB boundary and asks for transparent huge pages (THP "madvise" mode,
// Debian's default), so filling it takes a few faults instead of one per 4 KiB (under
// virtualization those cost more than the copy) and reading it a few TLB entries. The
// last partial 2 MiB stays in small pages: the buffer's resident size is its own size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cact {

// `bytes` of zeroed memory, 64-byte aligned at least; null when the system refuses the
// mapping. Unmapped when the last owner lets go. Harmless when the kernel refuses huge
// pages (the memory is then ordinary pages).
std::shared_ptr<uint8_t> AllocateHugePageBuffer(size_t bytes);

}  // namespace cact
