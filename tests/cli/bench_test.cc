// `cact-run bench` as a library (tools/cact-run/bench/bench.h) on the tiny fixture: every arm and
// test is measured (positive tokens/s), the report carries the machine limits, and bad options are
// clear errors. (Timings are not checked: they depend on the machine.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/kernels/cq_kernels.h"
#include "support/test_support.h"
#include "tools/cact-run/bench/bench.h"

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
  o.session_tokens = 0;  // the fresh-process session has its own test
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

// --kernels: every fast arm once per kernel, named arm@kernel, with the side-by-side ratio
// table; each run really uses its kernel (the scalar one is far slower than any SIMD one,
// which the ratio shows); an unknown kernel is an error.
TEST(FastBench, KernelsRunSideBySide) {
  BenchOptions o = Small();
  o.threads = {1};
  o.depths = {0};
  o.prompt = {64};
  o.reps = 1;
  o.arms = {"fast-int8", "ref"};
  const kernels::Isa best = kernels::BestIsa();
  if (best == kernels::Isa::kScalar) GTEST_SKIP() << "no SIMD kernel on this CPU to compare";
  o.kernels = {"scalar", kernels::IsaName(best)};
  const kernels::Isa before = kernels::ActiveIsa();
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(kernels::ActiveIsa(), before);  // restored after every run
  const std::string simd = std::string("fast-int8@") + kernels::IsaName(best);
  EXPECT_NE(report->find("| fast-int8@scalar | 1 | pp64 |"), std::string::npos) << *report;
  EXPECT_NE(report->find("| " + simd + " | 1 | pp64 |"), std::string::npos) << *report;
  EXPECT_NE(report->find("| ref | 1 | pp64 |"), std::string::npos) << *report;
  const std::string header = " " + simd + " / fast-int8@scalar |";
  const size_t at = report->find(header);
  ASSERT_NE(at, std::string::npos) << *report;
  // The ratio row for pp64 on one thread: the SIMD kernel must be measurably faster.
  const size_t row = report->find("| 1 | pp64 |", at);
  ASSERT_NE(row, std::string::npos);
  const double ratio = std::stod(report->substr(row + 13));
  EXPECT_GT(ratio, 1.5) << report->substr(row, 40);

  o.kernels = {"avx9000"};
  EXPECT_FALSE(RunBench(o).ok());
}

// The -rows arms (the fast paths without code tiles) run beside their tiled arms, with the
// side-by-side ratio; nothing else ends in -rows.
TEST(FastBench, RowsArmsRunBesideTheTiledOnes) {
  BenchOptions o = Small();
  o.threads = {1};
  o.depths = {0};
  o.reps = 1;
  o.arms = {"fast", "fast-rows", "fast-int8-rows"};
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->find("| fast-rows | 1 | pp8 |"), std::string::npos) << *report;
  EXPECT_NE(report->find("| fast-int8-rows | 1 | tg4 @ d0 |"), std::string::npos) << *report;
  EXPECT_NE(report->find("fast / fast-rows"), std::string::npos) << *report;
  o.arms = {"ref-rows"};
  EXPECT_FALSE(RunBench(o).ok());
}

// Start-up and memory: in-process open/setup timings per repetition, and a fresh cact-run
// session that must reach exactly the requested positions (decoding past EOS).
TEST(FastBench, SessionFiguresComeFromAFreshProcess) {
  ASSERT_TOOL_BUILT("cact-run");
  BenchOptions o = Small();
  o.threads = {1};
  o.depths = {0};
  o.arms = {"fast"};
  o.format = "json";
  o.session_tokens = 40;
  o.run_binary = Tool("cact-run");
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  auto j = nlohmann::json::parse(*report);
  ASSERT_EQ(j["session"].size(), 1u);
  const auto& s = j["session"][0];
  ASSERT_EQ(s["open_validate_ms"].size(), 2u);
  for (double v : s["open_validate_ms"]) EXPECT_GT(v, 0.0);
  for (double v : s["fast_setup_ms"]) EXPECT_GT(v, 0.0);
  EXPECT_EQ(s["session_prompt"], 8u);
  EXPECT_EQ(s["session_tokens"], 40u);
  // A process that mapped the model and linked the C++ runtime: more than 1 MiB resident.
  EXPECT_GT(s["session_peak_rss_bytes"].get<uint64_t>(), uint64_t(1) << 20);
  EXPECT_GT(s["session_decode_tps"].get<double>(), 0.0);

  o.format = "md";
  report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(
      report->find("| threads | open + validate ms | fast-path setup ms | session peak RSS MiB"),
      std::string::npos)
      << *report;

  o.run_binary = "/nonexistent/cact-run";  // the session cannot start: an error, not a zero
  EXPECT_FALSE(RunBench(o).ok());
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

// The tool-call figures cold, warm in the process and warm from a prompt cache file: the bench
// itself refuses to report when a warm answer differs from the cold one.
TEST(FastBench, ToolCallColdAndWarmSideBySide) {
  BenchOptions o = Small();
  o.model_path = std::string(CACT_SOURCE_DIR) + "/docs/reference-model/reference.cact";
  o.arms = {"fast"};
  o.threads = {1};
  o.depths = {0};
  o.tool_call_tokens = 16;
  o.format = "json";
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  const nlohmann::json j = nlohmann::json::parse(*report);
  ASSERT_EQ(j["tool_call"].size(), 1u);
  const nlohmann::json& t = j["tool_call"][0];
  for (const char* key : {"end_to_end_ms", "warm_ms", "warm_prefill_ms", "warm_from_file_ms"}) {
    ASSERT_EQ(t[key].size(), 2u) << key;
    for (double v : t[key]) EXPECT_GT(v, 0.0) << key;
  }
  EXPECT_GT(t["prompt_cache_bytes"].get<uint64_t>(), 100000u);
  o.format = "md";
  report = RunBench(o);
  ASSERT_TRUE(report.ok());
  EXPECT_NE(report->find("| threads | cold ms | warm ms | warm / cold | warm from file ms |"),
            std::string::npos)
      << *report;
}

}  // namespace
}  // namespace cact::testing
