// Probe heads (odd fixture: contrastive 4 probes -> 32, confidence 8 probes -> 1) against a
// float64 numpy oracle (tests/engine/probe_oracle.py) fed the official dequantized weights
// and hidden states. s1 contains a PAD token, so the mask is exercised.
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/forward.h"
#include "engine/probe_heads.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

TEST(ProbeHeads, MatchNumpyOracleOnOddFixture) {
  const Model& model = FixtureModel("odd");
  ASSERT_EQ(model.probe_heads().size(), 2u);
  for (const std::string seq : {"s1", "s2"}) {
    TempDir dir;
    CommandResult r =
        cact::testing::Run(Python() + " " + CACT_SOURCE_DIR + "/tests/engine/probe_oracle.py " +
                           Fixture("odd", "") + " " + seq + " " + (dir / "out.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream f(dir / "out.json");
    const nlohmann::json want = nlohmann::json::parse(f);
    const std::vector<int32_t> tokens = FixtureTokens("odd", seq);

    // 1. On the official hidden states: only dequantization (<= 3e-6) and summation order
    //    differ, so 1e-4 absolute on unit-norm / O(1) outputs is generous.
    NpyArray hidden = LoadNpy(Fixture("odd", "hidden_" + seq + ".npy"));
    auto out = ComputeProbeHeads(model, tokens, hidden.data);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto retrieval = want.at("contrastive_head").get<std::vector<double>>();
    ASSERT_EQ(out->retrieval.size(), retrieval.size());
    double norm = 0;
    for (size_t i = 0; i < retrieval.size(); ++i) {
      EXPECT_NEAR(out->retrieval[i], retrieval[i], 1e-4) << seq << " " << i;
      norm += double(out->retrieval[i]) * out->retrieval[i];
    }
    EXPECT_NEAR(norm, 1.0, 1e-5);
    ASSERT_TRUE(out->has_confidence);
    EXPECT_NEAR(out->confidence, want.at("confidence_head")[0].get<double>(), 1e-4) << seq;

    // 2. End to end from the reference forward's own hidden states.
    ForwardOptions opt;
    opt.keep_hidden = true;
    auto fwd = MakeReferenceForward(model, opt);
    ASSERT_TRUE(fwd->Feed(tokens, nullptr, false).ok());
    auto own = ComputeProbeHeads(model, tokens, fwd->hidden());
    ASSERT_TRUE(own.ok()) << own.status();
    for (size_t i = 0; i < retrieval.size(); ++i)
      EXPECT_NEAR(own->retrieval[i], retrieval[i], 1e-4) << seq << " " << i;
    EXPECT_NEAR(own->confidence, want.at("confidence_head")[0].get<double>(), 1e-4) << seq;

    // 3. The recorded [T][L][d] layout reads the same cells: bit-identical outputs.
    auto by_position =
        ComputeProbeHeads(model, tokens, fwd->hidden_by_position(), 0, HiddenLayout::kByPosition);
    ASSERT_TRUE(by_position.ok()) << by_position.status();
    EXPECT_EQ(by_position->retrieval, own->retrieval) << seq;
    EXPECT_EQ(by_position->confidence, own->confidence) << seq;
    EXPECT_NE(fwd->hidden_by_position(), fwd->hidden());  // the layouts do differ
  }
}

// Threads share a block's probes: the same bits for any count (400 tokens of random lane
// means: enough work for the threads to start).
TEST(ProbeHeads, PooledBlocksAreTheSameBitsForAnyThreadCount) {
  const Model& model = FixtureModel("odd");
  const size_t T = 400, row = size_t(model.num_layers()) * model.d_model();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> hidden(T * row);
  for (float& v : hidden) v = normal(rng);
  std::vector<int32_t> tokens(T);
  for (size_t t = 0; t < T; ++t) tokens[t] = int32_t(rng() % model.vocab());
  tokens[7] = 0;  // padding, masked out
  auto one = PoolProbeBlock(model, tokens, hidden, 0, HiddenLayout::kByPosition, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  for (int threads : {2, 3, 16}) {
    auto many = PoolProbeBlock(model, tokens, hidden, 0, HiddenLayout::kByPosition, threads);
    ASSERT_TRUE(many.ok()) << many.status();
    ASSERT_EQ(many->heads.size(), one->heads.size());
    for (size_t h = 0; h < one->heads.size(); ++h)
      for (size_t p = 0; p < one->heads[h].size(); ++p) {
        const ProbeBlock::Probe &a = one->heads[h][p], &b = many->heads[h][p];
        EXPECT_EQ(a.max, b.max) << threads << " threads, head " << h << " probe " << p;
        EXPECT_EQ(a.sum, b.sum) << threads << " threads, head " << h << " probe " << p;
        EXPECT_EQ(a.acc, b.acc) << threads << " threads, head " << h << " probe " << p;
      }
  }
  // And the finished heads equal the one-pass computation up to the blocks' reordering.
  auto finished = FinishProbeBlocks(model, std::span(&*one, 1));
  auto direct = ComputeProbeHeads(model, tokens, hidden, 0, HiddenLayout::kByPosition);
  ASSERT_TRUE(finished.ok() && direct.ok());
  EXPECT_NEAR(finished->confidence, direct->confidence, 1e-4);
}

TEST(ProbeHeads, AbsentHeadsAndBadInput) {
  const Model& tiny = FixtureModel("tiny");
  const std::vector<int32_t> tokens = {2, 5, 7};
  std::vector<float> hidden(size_t(tiny.num_layers()) * tokens.size() * tiny.d_model(), 0.5f);
  auto out = ComputeProbeHeads(tiny, tokens, hidden);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->retrieval.empty());
  EXPECT_FALSE(out->has_confidence);
  const Model& odd = FixtureModel("odd");
  EXPECT_FALSE(ComputeProbeHeads(odd, tokens, hidden).ok());  // wrong hidden size
  std::vector<float> h2(size_t(odd.num_layers()) * 2 * odd.d_model());
  EXPECT_FALSE(ComputeProbeHeads(odd, std::vector<int32_t>{0, 0}, h2).ok());  // all padding
}

}  // namespace
}  // namespace cact::testing
