// Room on the heap for a few hundred MB of large arrays (a model's weights in float32),
// faulted in as transparent huge pages where the kernel grants them on request (THP
// "madvise" mode, Debian's default). Each large std::vector otherwise gets its own mmap and
// one page fault per 4 KiB; under virtualization those faults cost more than the work
// itself (docs/cact-quant.md, "Performance"). Process-wide malloc tuning: programs call it,
// libraries do not.
#pragma once
#include <cstddef>

namespace cact {

// Makes allocations up to 32 MiB come from the main heap, grows it once by `bytes`, keeps
// what is freed there, and asks for huge pages over the new range. Returns the bytes so
// marked (0 when nothing was done: `bytes` under 64 MiB, or a heap that did not grow, as
// under the sanitizers' allocators). Harmless when the kernel refuses huge pages.
size_t ReserveHugePageHeap(size_t bytes);

}  // namespace cact
