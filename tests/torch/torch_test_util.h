// Helpers shared by the libtorch tests: fixture tokens and arrays, exported modules cached
// per process (an export takes ~0.3 s), and comparison statistics.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libtorch/torch_module.h"
#include "formats/cact/cact_file.h"
#include "lib/npy.h"
#include "support/test_support.h"

namespace cact::testing {

inline std::vector<int64_t> FixtureTokens64(const std::string& kase, const std::string& seq) {
  std::ifstream f(Fixture(kase, "tokens_" + seq + ".json"));
  return nlohmann::json::parse(f).at("tokens").get<std::vector<int64_t>>();
}

inline std::vector<float> NpyData(const std::string& path, std::vector<size_t>* shape = nullptr) {
  auto a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return {};
  if (shape) *shape = a->shape;
  return std::move(a->data);
}

// max |a - b| / max |b|: the "relative" error of the tests (1e-4 for FP32 paths whose only
// difference is summation order; a real mistake moves logits by > 1e-2 of their range).
inline double MaxRelErr(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// One exported module per fixture case, kept for the whole test process.
struct ExportedCase {
  TempDir dir;
  std::string pt;
  std::unique_ptr<torchscript::TorchModel> model;
};

inline ExportedCase& Exported(const std::string& kase) {
  static std::map<std::string, std::unique_ptr<ExportedCase>> cache;
  auto& slot = cache[kase];
  if (!slot) {
    slot = std::make_unique<ExportedCase>();
    slot->pt = slot->dir / (kase + ".pt");
    auto file = CactFile::Open(Fixture(kase, "model.cact"));
    EXPECT_TRUE(file.ok()) << file.status();
    absl::Status s = torchscript::ExportTorchScript(*file, slot->pt);
    EXPECT_TRUE(s.ok()) << s;
    auto m = torchscript::TorchModel::Load(slot->pt);
    EXPECT_TRUE(m.ok()) << m.status();
    if (m.ok()) slot->model = std::move(m).value();
  }
  return *slot;
}

}  // namespace cact::testing
