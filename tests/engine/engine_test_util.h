// Helpers shared by the engine tests: fixture models, token sequences, array statistics.
#pragma once
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "lib/npy.h"
#include "support/test_support.h"

namespace cact::testing {

inline std::vector<int32_t> FixtureTokens(const std::string& kase, const std::string& seq) {
  std::ifstream f(Fixture(kase, "tokens_" + seq + ".json"));
  nlohmann::json j = nlohmann::json::parse(f);
  return j.at("tokens").get<std::vector<int32_t>>();
}

// Loads a fixture model once per process (models are small, tests reuse them).
inline const Model& FixtureModel(const std::string& kase) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto it = cache.find(kase);
  if (it == cache.end()) {
    auto m = Model::Open(Fixture(kase, "model.cact"));
    if (!m.ok()) {
      ADD_FAILURE() << m.status();
      std::abort();
    }
    it = cache.emplace(kase, std::move(m).value()).first;
  }
  return *it->second;
}

inline NpyArray LoadNpy(const std::string& path) {
  auto a = ReadNpy(path);
  if (!a.ok()) {
    ADD_FAILURE() << a.status();
    return {};
  }
  return std::move(a).value();
}

inline double StdDev(const std::vector<float>& v) {
  double mean = 0, sq = 0;
  for (float x : v) mean += x;
  mean /= double(v.size());
  for (float x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / double(v.size()));
}

inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, double(std::fabs(a[i] - b[i])));
  return a.size() == b.size() ? m : INFINITY;
}

inline double RelL2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), ref.size()); ++i) {
    num += double(a[i] - ref[i]) * (a[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return a.size() == ref.size() ? std::sqrt(num / std::max(den, 1e-300)) : INFINITY;
}

}  // namespace cact::testing
