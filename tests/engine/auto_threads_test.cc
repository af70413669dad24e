// The default thread count (AutoThreads): the CPUs this process may run on, at most the
// model's KV heads, on the fast paths; one on the FP32 reference. Oracle: AvailableCpus
// (the affinity mask, as `nproc` reads it) and the rule itself, with KV head counts on
// both sides of it.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/forward_paths.h"
#include "lib/cpu_features.h"

namespace cact {
namespace {

TEST(AutoThreads, AtMostTheKvHeadsOnTheFastPaths) {
  const int cpus = AvailableCpus();
  for (const char* path : {"fast", "fast-int8", "auto"}) {
    EXPECT_EQ(AutoThreads(path, 1), 1) << path;  // one head: one thread, however many CPUs
    EXPECT_EQ(AutoThreads(path, 4), std::min(cpus, 4)) << path;
    EXPECT_EQ(AutoThreads(path, 1u << 20), std::min(cpus, 256)) << path;  // -t's most
    EXPECT_EQ(AutoThreads(path, 0), 1) << path;            // never zero
  }
}

TEST(AutoThreads, OneOnTheReference) {
  for (const char* path : {"ref", "reference"}) EXPECT_EQ(AutoThreads(path, 4), 1) << path;
}

}  // namespace
}  // namespace cact
