// Largest single `operator new` request while a probe is armed (allocation_probe.cc replaces
// the global operator new/delete of the reliability test executable), and a forked child
// run under a small RLIMIT_AS (which also covers malloc from C libraries such as zstd).
// Together they show that a lying header is rejected before anything is sized from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cact::reliability {

// Arms the probe for the lifetime of the object; max_request() is the largest single
// allocation seen since construction (any thread).
class AllocationProbe {
 public:
  AllocationProbe();
  ~AllocationProbe();
  size_t max_request() const;
};

// True when the build has AddressSanitizer (which reserves terabytes of address space, so
// RLIMIT_AS cannot be used and ASan itself aborts on absurd allocations instead).
constexpr bool kAddressSanitizer =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

struct ChildResult {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  std::string describe() const;
};

// Runs `fn` in a forked child whose address space may grow by at most `headroom` bytes
// (no limit under ASan); the child exits with fn()'s value (0..255). An allocation beyond
// the limit throws std::bad_alloc, which terminates the child with SIGABRT.
ChildResult RunInChildWithAddressSpaceLimit(const std::function<int()>& fn, uint64_t headroom);

}  // namespace cact::reliability
