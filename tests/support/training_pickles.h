// The official fine-tuning pickles of a fixture, written once per test process by
// tests/quant/write_flax_pickles.py (Debian's python3 + numpy): Flax checkpoints (float32 in
// protocols 2/4/5, float16, numpy-2 global names), a LoRA adapter, the merged projections it
// implies, and hostile pickles whose payload would create `Marker()`.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "support/test_support.h"

namespace cact::testing {

class TrainingPickles {
 public:
  // The directory holding `kase`'s pickles; a failed writer fails the calling test.
  static std::string Dir(const std::string& kase) {
    static std::map<std::string, std::unique_ptr<TempDir>> dirs;
    auto& d = dirs[kase];
    if (!d) {
      d = std::make_unique<TempDir>();
      const CommandResult r =
          Run(Python() + " " + CACT_SOURCE_DIR + "/tests/quant/write_flax_pickles.py " +
              Fixture(kase, "") + " " + d->path() + " --marker " + Marker());
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return d->path();
  }
  static std::string File(const std::string& kase, const std::string& name) {
    return Dir(kase) + "/" + name;
  }
  // Where a hostile pickle's payload would write if anything executed it.
  static std::string Marker() {
    static TempDir marker_dir;
    return marker_dir / "PWNED";
  }
};

}  // namespace cact::testing
