// `cact-run bench` as a library (engine/bench.h) on the tiny fixture: every arm and test
// is measured (positive tokens/s), the report carries the machine limits, and bad
// options are clear errors. (Timings are not checked: they depend on the machine.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/bench.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

BenchOptions Small() {
  BenchOptions o;
  o.model_path = Fixture("tiny", "model.cact");
  o.prompt = {8};
  o.gen = 4;
  o.depths = {0, 20};
  o.reps = 2;
  o.threads = {1, 2};
  o.arms = {"fast", "fast-int8", "ref"};
  o.limits_seconds = 0.02;
  return o;
}

TEST(FastBench, JsonReportHasEveryArmTestAndLimit) {
  BenchOptions o = Small();
  o.format = "json";
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  auto j = nlohmann::json::parse(*report);
  ASSERT_EQ(j["results"].size(), 3u * 2u * 3u);  // tests x threads x arms
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["samples"].size(), 2u) << r.dump();
    EXPECT_GT(r["mean_tps"].get<double>(), 0.0) << r.dump();
  }
  EXPECT_EQ(j["results"][0]["test"], "pp8");
  EXPECT_EQ(j["results"].back()["test"], "tg4 @ d20");
  ASSERT_EQ(j["limits"].size(), 2u);
  for (const auto& l : j["limits"]) {
    EXPECT_GT(l["read_gbs"].get<double>(), 0.1);
    EXPECT_GT(l["int8_gmacs"].get<double>(), 0.1);
    EXPECT_GT(l["floor_ms_per_token"].get<double>(), 0.0);
  }
  EXPECT_GT(j["model"]["code_bytes"].get<uint64_t>(), 0u);
}

TEST(FastBench, MarkdownHasTheTablesAndRatios) {
  BenchOptions o = Small();
  o.threads = {1};
  o.depths = {0};
  o.reps = 1;
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->find("| arm | threads | test | t/s |"), std::string::npos) << *report;
  EXPECT_NE(report->find("| fast | 1 | pp8 |"), std::string::npos);
  EXPECT_NE(report->find("fast / ref"), std::string::npos);
  EXPECT_NE(report->find("fraction of floor"), std::string::npos);
}

TEST(FastBench, BadOptionsAreErrors) {
  BenchOptions o = Small();
  o.arms = {"fast", "gpu"};
  EXPECT_FALSE(RunBench(o).ok());
  o = Small();
  o.arms = {"torch"};  // needs --torch
  EXPECT_FALSE(RunBench(o).ok());
  o = Small();
  o.prompt = {100000};
  EXPECT_FALSE(RunBench(o).ok());
  o = Small();
  o.model_path = "/nonexistent.cact";
  EXPECT_FALSE(RunBench(o).ok());
}

}  // namespace
}  // namespace cact::testing
