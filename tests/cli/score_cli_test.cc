// `cact-run perplexity` and `cact-run compare` against a float64 numpy oracle
// (tests/cli/score_oracle.py) that chunks the fixture's official token ids itself and scores
// the official decode's logits (first chunk) or the reference path's (later chunks): the
// figures agree to 1e-5 relative (the official and reference logits differ by <= 6e-6, the
// float exp by ~1 ulp). Also: the fast path is deterministic across thread counts, a model
// compared with itself gives zero divergence, the SVG histogram counts every token, and bad
// input exits 2 with a message that names the problem.
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::FixtureCases;
using testing::TempDir;
using testing::Tool;
using nlohmann::json;

// The fixture sentence s2 as a text file; its official ids are tokens_s2.json minus BOS.
std::string WriteSentence(const TempDir& dir, const std::string& kase) {
  std::ifstream f(Fixture(kase, "tokens_s2.json"));
  const std::string path = dir / (kase + "_s2.txt");
  std::ofstream(path) << json::parse(f).at("text").get<std::string>();
  return path;
}

json RunJson(const std::string& args) {
  auto r = testing::Run(Tool("cact-run") + " " + args + " --json -q 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::object();
}

json Oracle(const std::string& kase, const std::string& args) {
  auto r = testing::Run(testing::Python() + " " + CACT_SOURCE_DIR +
                        "/tests/cli/score_oracle.py --cact-run " + Tool("cact-run") +
                        " --tokens-json " + Fixture(kase, "tokens_s2.json") + " " + args +
                        " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json::object();
}

void ExpectRelNear(double got, double want, double rel, const std::string& what) {
  EXPECT_NEAR(got, want, rel * std::abs(want) + 1e-12) << what;
}

// Tolerance of a compare figure against the oracle: 1e-5 relative, plus the float exp's
// absolute floor for KLDs (~1e-8 nats, logit_stats.h); ln(PPL ratio) is a difference of two
// mean NLLs, each known to 1e-5 relative (the official and reference logits differ by up to
// 6e-6), so its error scales with the NLL, not with the difference.
double CompareTolerance(const json& want, const std::string& key) {
  const double v = std::abs(double(want[key]));
  if (key == "ln_ppl_ratio") return 1e-5 * double(want["nll_mean"]);
  return 1e-5 * v + (key.rfind("kld", 0) == 0 ? 1e-8 : 1e-9);
}

TEST(Perplexity, MatchesTheOfficialDecodeInOneChunk) {
  TempDir dir;
  for (const std::string& kase : FixtureCases()) {
    SCOPED_TRACE(kase);
    const std::string model = Fixture(kase, "model.cact");
    json got = RunJson("perplexity " + model + " -f " + WriteSentence(dir, kase) + " --path ref");
    json want = Oracle(kase, "--ctx 512 --base " + model + " --base-official " +
                                 Fixture(kase, "logits_s2.npy"));
    ASSERT_FALSE(got.empty() || want.empty());
    EXPECT_EQ(got["tokens_scored"], want["tokens_scored"]);
    EXPECT_EQ(got["chunks"], 1);
    ExpectRelNear(got["ppl"], want["ppl"], 1e-5, "ppl");
    ExpectRelNear(got["nll_mean"], want["nll_mean"], 1e-5, "nll_mean");
    ExpectRelNear(got["per_chunk"][0]["nll_sum"], want["chunks"][0]["nll_sum"], 1e-5, "nll_sum");
    EXPECT_EQ(got["path"], "reference");
  }
}

TEST(Perplexity, AppliesTheAttentionWindowLikeTheOfficialDecode) {
  TempDir dir;
  for (const std::string& kase : FixtureCases()) {
    SCOPED_TRACE(kase);
    const std::string model = Fixture(kase, "model.cact");
    json got = RunJson("perplexity " + model + " -f " + WriteSentence(dir, kase) +
                       " --path ref --window 16 --sink 4");
    json want = Oracle(kase, "--ctx 512 --window 16 --sink 4 --base " + model +
                                 " --base-official " + Fixture(kase, "logits_s2_w16p4.npy"));
    ASSERT_FALSE(got.empty() || want.empty());
    EXPECT_EQ(got["window"], 16);
    ExpectRelNear(got["ppl"], want["ppl"], 1e-5, "ppl");
  }
}

TEST(Perplexity, ScoresEveryChunkFromItsOwnPrefix) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  // 60 tokens at ctx 17: chunks of 16, 16, 16 and 12 tokens.
  json got = RunJson("perplexity " + model + " -f " + WriteSentence(dir, "tiny") +
                     " --path ref --ctx 17");
  json want = Oracle("tiny", "--ctx 17 --base " + model + " --base-official " +
                                 Fixture("tiny", "logits_s2.npy"));
  ASSERT_FALSE(got.empty() || want.empty());
  ASSERT_EQ(got["per_chunk"].size(), 4u);
  ASSERT_EQ(want["chunks"].size(), 4u);
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(got["per_chunk"][c]["begin"], want["chunks"][c]["begin"]) << c;
    EXPECT_EQ(got["per_chunk"][c]["tokens"], want["chunks"][c]["tokens"]) << c;
    ExpectRelNear(got["per_chunk"][c]["nll_sum"], want["chunks"][c]["nll_sum"], 1e-5,
                  "chunk " + std::to_string(c));
  }
  ExpectRelNear(got["ppl"], want["ppl"], 1e-5, "ppl");
  // --chunks keeps the first N.
  json two = RunJson("perplexity " + model + " -f " + WriteSentence(dir, "tiny") +
                     " --path ref --ctx 17 --chunks 2");
  EXPECT_EQ(two["tokens_scored"], 32);
}

TEST(Compare, MatchesTheOracleOnARequantizedModel) {
  TempDir dir;
  const std::string base = Fixture("tiny", "model.cact"), other = dir / "other.cact";
  auto built = testing::Run(Tool("cact-quant") + " build --weights " +
                            Fixture("tiny", "weights.safetensors") + " --base " + base +
                            " --scheme embedding=4,mhc=4,default=3 --force-requantize -q -o " +
                            other);
  ASSERT_EQ(built.exit_code, 0) << built.output;
  json got = RunJson("compare " + base + " " + other + " -f " + WriteSentence(dir, "tiny") +
                     " --path ref --ctx 33");
  json want = Oracle("tiny", "--ctx 33 --base " + base + " --base-official " +
                                 Fixture("tiny", "logits_s2.npy") + " --other " + other);
  ASSERT_FALSE(got.empty() || want.empty());
  EXPECT_EQ(got["tokens_scored"], 60);
  EXPECT_EQ(got["chunks"], 2);
  EXPECT_GT(double(want["kld_mean"]), 1e-4) << "the two models should differ";
  for (const auto& [key, value] : want.items()) {
    if (key == "chunks" || key == "tokens_scored" || key == "nll_mean" || key == "ppl") continue;
    ASSERT_TRUE(got.contains(key)) << key;
    if (key == "top1_agreement")
      EXPECT_EQ(double(got[key]), double(value));
    else
      EXPECT_NEAR(double(got[key]), double(value), CompareTolerance(want, key)) << key;
  }
}

TEST(Compare, MeasuresTheFastPathAgainstTheReferenceOfOneModel) {
  TempDir dir;
  const std::string model = Fixture("odd", "model.cact");
  for (const std::string path : {"fast", "fast-int8"}) {
    SCOPED_TRACE(path);
    json got = RunJson("compare " + model + " " + model + " -f " + WriteSentence(dir, "odd") +
                       " --path ref --other-path " + path + " --ctx 40");
    json want = Oracle("odd", "--ctx 40 --base " + model + " --base-official " +
                                  Fixture("odd", "logits_s2.npy") + " --other " + model +
                                  " --other-path " + path);
    ASSERT_FALSE(got.empty() || want.empty());
    EXPECT_EQ(got["path"], "reference");
    EXPECT_EQ(got["other_path"], path);
    EXPECT_GT(double(want["kld_max"]), 0.0) << "the int8 path is not the reference";
    for (const std::string key : {"kld_mean", "kld_median", "kld_p99", "kld_max", "ppl_base",
                                  "ppl_other", "ln_ppl_ratio", "delta_p_rms"})
      EXPECT_NEAR(double(got[key]), double(want[key]), CompareTolerance(want, key)) << key;
    EXPECT_EQ(double(got["top1_agreement"]), double(want["top1_agreement"]));
  }
}

TEST(Compare, AModelAgainstItselfOnTheFastPathDivergesNowhere) {
  TempDir dir;
  const std::string model = Fixture("odd", "model.cact");
  json r = RunJson("compare " + model + " " + model + " -f " + WriteSentence(dir, "odd") +
                   " --path fast --ctx 40 -t 2");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["path"], "fast");
  EXPECT_EQ(double(r["kld_max"]), 0.0);
  EXPECT_EQ(double(r["top1_agreement"]), 1.0);
  EXPECT_EQ(double(r["ppl_base"]), double(r["ppl_other"]));
  EXPECT_EQ(double(r["delta_p_rms"]), 0.0);
}

TEST(Perplexity, FastPathIsDeterministicAcrossThreadsAndCloseToTheReference) {
  TempDir dir;
  const std::string model = Fixture("odd", "model.cact"), text = WriteSentence(dir, "odd");
  json one = RunJson("perplexity " + model + " -f " + text + " --path fast --ctx 24 -t 1");
  json two = RunJson("perplexity " + model + " -f " + text + " --path fast --ctx 24 -t 2");
  json three = RunJson("perplexity " + model + " -f " + text + " --path fast --ctx 24 -t 3");
  json ref = RunJson("perplexity " + model + " -f " + text + " --path ref --ctx 24");
  ASSERT_FALSE(one.empty() || two.empty() || three.empty() || ref.empty());
  EXPECT_EQ(two["workers"], 2);
  EXPECT_EQ(one["per_chunk"], two["per_chunk"]);
  EXPECT_EQ(one["per_chunk"], three["per_chunk"]);
  EXPECT_EQ(double(one["nll_mean"]), double(two["nll_mean"]));
  // The fast path's logits are within 0.5 % rel-L2 of the reference (its contract, checked
  // by --validate): the mean NLL moves by well under 1 %.
  ExpectRelNear(one["nll_mean"], ref["nll_mean"], 0.01, "fast vs reference nll_mean");
}

TEST(Compare, WritesAnSvgHistogramOfEveryToken) {
  TempDir dir;
  const std::string base = Fixture("tiny", "model.cact"), other = dir / "other.cact";
  ASSERT_EQ(testing::Run(Tool("cact-quant") + " requant " + base +
                         " --scheme embedding=4,mhc=4,default=4 -q -o " + other)
                .exit_code,
            0);
  const std::string svg = dir / "kld.svg";
  auto r = testing::Run(Tool("cact-run") + " compare " + base + " " + other + " -f " +
                        WriteSentence(dir, "tiny") + " --ctx 20 --svg " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("KL divergence statistics"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Same top p"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[4/4]"), std::string::npos) << "progress lines: " << r.output;
  const std::vector<uint8_t> bytes = testing::ReadAll(svg);
  const std::string doc(bytes.begin(), bytes.end());
  ASSERT_EQ(doc.rfind("<svg", 0), 0u) << doc.substr(0, 80);
  EXPECT_NE(doc.find("</svg>"), std::string::npos);
  // Every bar's tooltip gives its count: together they are every scored token.
  size_t total = 0;
  const std::string tail = " tokens</title>";
  for (size_t at = doc.find(tail); at != std::string::npos; at = doc.find(tail, at + 1)) {
    size_t digits = at;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(doc[digits - 1]))) --digits;
    ASSERT_LT(digits, at) << doc.substr(at > 40 ? at - 40 : 0, 60);
    total += std::stoul(doc.substr(digits, at - digits));
  }
  EXPECT_EQ(total, 60u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 3u) << "the text, other.cact and kld.svg; no temporary file left";
}

TEST(Perplexity, TextReportGivesTheFinalEstimate) {
  TempDir dir;
  auto r = testing::Run(Tool("cact-run") + " perplexity " + Fixture("tiny", "model.cact") +
                        " -f " + WriteSentence(dir, "tiny") + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string head = "Final estimate: PPL = ";
  const size_t at = r.output.find(head);
  ASSERT_NE(at, std::string::npos) << r.output;
  const size_t value = at + head.size(), plus_minus = r.output.find(" +/- ", value);
  ASSERT_NE(plus_minus, std::string::npos) << r.output;
  EXPECT_GT(std::stod(r.output.substr(value, plus_minus - value)), 1.0) << r.output;
  EXPECT_EQ(r.output.find("[1/1]"), std::string::npos) << "-q prints no progress";
}

TEST(Perplexity, BadInputExitsTwoAndSaysWhy) {
  TempDir dir;
  const std::string tiny = Fixture("tiny", "model.cact"), odd = Fixture("odd", "model.cact");
  const std::string text = WriteSentence(dir, "tiny"), empty = dir / "empty.txt";
  std::ofstream(empty).flush();
  const std::pair<std::string, std::string> cases[] = {
      {"perplexity " + tiny + " -f " + dir / "missing.txt", "missing.txt: cannot read"},
      {"perplexity " + tiny + " -f " + empty, "no tokens"},
      {"perplexity " + tiny + " -f " + text + " --ctx 1", "--ctx: must be a whole number in [2,"},
      {"perplexity " + tiny + " -f " + text + " --ctx 100000", "max_seq_len"},
      {"perplexity " + dir / "nope.cact" + " -f " + text, "nope.cact"},
      {"compare " + tiny + " " + odd + " -f " + text, "same tokenizer"},
      {"perplexity " + tiny, "--file"},
  };
  for (const auto& [args, message] : cases) {
    auto r = testing::Run(Tool("cact-run") + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace cact
