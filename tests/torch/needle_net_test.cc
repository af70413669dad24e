// The trainer's eager-libtorch forward (libtorch/needle_net.h) against (1) the official
// decoder's logits in the fixtures, fed the fixture's dequantized weights, window/sink cases
// included (max|diff| <= 1e-4 x max|official|: FP32 on both sides, only the summation order
// differs), and (2) its own gradients in float64 against central finite differences (rel
// 1e-6): a detached path or a wrong backward shows up as an O(1) difference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>

#include "formats/cact/cact_file.h"
#include "libtorch/needle_net.h"
#include "libtorch/trainer.h"
#include "quant/dequant_export.h"
#include "support/decode_cases.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

using train::NeedleNet;
using train::WeightMap;

struct FixtureNet {
  Geometry geometry;
  WeightMap weights;
};

FixtureNet LoadFixture(const std::string& kase) {
  auto file = CactFile::Open(Fixture(kase, "model.cact"));
  EXPECT_TRUE(file.ok()) << file.status();
  auto st = DequantizedWeights(*file);
  EXPECT_TRUE(st.ok()) << st.status();
  auto w = train::FromSafetensors(*st, file->geometry(), kase);
  EXPECT_TRUE(w.ok()) << w.status();
  return {file->geometry(), *w};
}

// The autograd gradient of `loss_of` (already backpropagated into w) at the entry of tensor
// `name` where it is largest (a zero gradient would prove nothing), against a central
// difference in float64: rel 1e-6.
void ExpectGradientMatchesFiniteDifference(
    const WeightMap& w, const std::string& name,
    const std::function<torch::Tensor(const WeightMap&)>& loss_of) {
  const torch::Tensor& p = w.at(name);
  torch::Tensor g = p.grad().reshape({-1});
  const int64_t i = g.abs().argmax().item<int64_t>();
  const double analytic = g[i].item<double>();
  ASSERT_GT(std::fabs(analytic), 1e-9) << name;
  const double h = 1e-5 * std::max(1.0, std::fabs(p.reshape({-1})[i].item<double>()));
  torch::NoGradGuard no_grad;
  auto shifted = [&](double delta) {
    WeightMap m = w;
    torch::Tensor q = p.detach().clone();
    q.reshape({-1})[i] += delta;
    m[name] = q;
    return loss_of(m).item<double>();
  };
  const double numeric = (shifted(h) - shifted(-h)) / (2 * h);
  EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::fabs(numeric))) << name;
}

class NeedleNetFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(NeedleNetFixture, MatchesOfficialLogits) {
  FixtureNet f = LoadFixture(GetParam());
  NeedleNet net(f.geometry);
  torch::NoGradGuard no_grad;
  for (const DecodeCase& c : DecodeCasesOf(GetParam())) {
    SCOPED_TRACE(c.suffix());
    std::vector<int64_t> tokens = FixtureTokens64(c.kase, c.seq);
    torch::Tensor t = torch::tensor(tokens).unsqueeze(0);
    torch::Tensor logits =
        net.Logits(t, f.weights, {int64_t(c.window), int64_t(c.sink)}).contiguous();
    std::vector<float> got(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
    std::vector<float> want = NpyData(Fixture(c.kase, "logits_" + c.suffix() + ".npy"));
    const double err = MaxRelErr(got, want);
    EXPECT_LE(err, 1e-4);
    RecordProperty("logits_relerr_" + c.suffix(), std::to_string(err));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NeedleNetFixture, ::testing::ValuesIn(FixtureCases()));

// A batch of two rows equals the rows one by one.
TEST(NeedleNet, BatchRowsAreIndependent) {
  FixtureNet f = LoadFixture("odd");
  NeedleNet net(f.geometry);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> a = FixtureTokens64("odd", "s2"), b = FixtureTokens64("odd", "s1");
  a.resize(b.size());
  torch::Tensor ta = torch::tensor(a).unsqueeze(0), tb = torch::tensor(b).unsqueeze(0);
  torch::Tensor both = net.Logits(torch::cat({ta, tb}, 0), f.weights);
  EXPECT_TRUE(torch::allclose(both[0], net.Logits(ta, f.weights)[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(both[1], net.Logits(tb, f.weights)[0], 1e-5, 1e-5));
}

// float64 autograd against central differences on entries of every kind of tensor.
TEST(NeedleNet, GradientsMatchFiniteDifferences) {
  FixtureNet f = LoadFixture("tiny");
  NeedleNet net(f.geometry);
  WeightMap w;
  for (auto& [name, t] : f.weights) w[name] = t.to(torch::kFloat64).requires_grad_(true);
  std::vector<int64_t> tokens = FixtureTokens64("tiny", "s2");
  torch::Tensor t = torch::tensor(tokens).unsqueeze(0);
  auto loss_of = [&](const WeightMap& m) { return train::NextTokenLoss(net.Logits(t, m), t); };
  torch::Tensor loss = loss_of(w);
  loss.backward();
  const std::vector<std::string> names = {
      "embedding",      "layer00.q_proj",    "layer00.k_norm",   "layer01.out_proj", "layer00.d1",
      "layer01.d3",     "layer00.attn_gate", "mhc_phi_res",      "mhc_b_res",        "mhc_a_pre",
      "engram0.tables", "engram0.taps",      "engram0.key_proj", "final_norm"};
  torch::manual_seed(3);
  int checked = 0;
  for (const std::string& name : names) {
    ASSERT_TRUE(w.count(name)) << name;
    ExpectGradientMatchesFiniteDifference(w, name, loss_of);
    ++checked;
  }
  EXPECT_EQ(checked, int(names.size()));
}

// A tap holds one head's attention weights: rows of probabilities over visible keys only
// (causal, and the window with its sink), the same whether taken alone or beside other
// heads' taps, and different from head to head.
TEST(NeedleNet, AttentionTapHoldsOneHeadsWeights) {
  FixtureNet f = LoadFixture("odd");
  NeedleNet net(f.geometry);
  ASSERT_GE(f.geometry.num_heads, 2u);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> tokens = FixtureTokens64("odd", "s2");
  torch::Tensor t = torch::tensor(tokens).unsqueeze(0);
  const int64_t T = t.size(1), window = 5, sink = 2;
  const uint32_t last = f.geometry.num_layers - 1, heads = f.geometry.num_heads;
  std::vector<train::AttentionTap> taps = {{0, 0, {}}, {last, heads - 1, {}}, {0, 1, {}}};
  torch::Tensor logits = net.Logits(t, f.weights, {window, sink}, &taps);
  // taps change nothing in the forward
  EXPECT_TRUE(torch::equal(logits, net.Logits(t, f.weights, {window, sink})));
  for (const train::AttentionTap& tap : taps) {
    SCOPED_TRACE(::testing::Message() << "layer " << tap.layer << " head " << tap.head);
    ASSERT_TRUE(tap.probs.defined());
    ASSERT_EQ(tap.probs.sizes(), torch::IntArrayRef({1, T, T}));
    EXPECT_TRUE(torch::allclose(tap.probs.sum(-1), torch::ones({1, T}), 1e-5, 1e-5));
    auto p = tap.probs.accessor<float, 3>();
    for (int64_t q = 0; q < T; ++q) {
      for (int64_t k = 0; k < T; ++k) {
        const bool visible = k <= q && (q - k < window || k < sink);
        if (visible) {
          EXPECT_GT(p[0][q][k], 0.0f) << q << " " << k;
        } else {
          EXPECT_EQ(p[0][q][k], 0.0f) << q << " " << k;
        }
      }
    }
  }
  EXPECT_FALSE(torch::allclose(taps[0].probs, taps[2].probs));
  std::vector<train::AttentionTap> alone = {{0, 1, {}}};
  net.Logits(t, f.weights, {window, sink}, &alone);
  EXPECT_TRUE(torch::equal(alone[0].probs, taps[2].probs));
}

// The previous-token loss is -log of the weight on key t-1, and its gradient reaches the
// weights (float64 autograd against central differences, as above).
TEST(NeedleNet, PreviousTokenLossAndItsGradient) {
  FixtureNet f = LoadFixture("tiny");
  NeedleNet net(f.geometry);
  WeightMap w;
  for (auto& [name, t] : f.weights) w[name] = t.to(torch::kFloat64).requires_grad_(true);
  std::vector<int64_t> tokens = FixtureTokens64("tiny", "s2");
  torch::Tensor t = torch::tensor(tokens).unsqueeze(0);
  auto loss_of = [&](const WeightMap& m) {
    std::vector<train::AttentionTap> taps = {{0, 0, {}}};
    net.Logits(t, m, {}, &taps);
    return std::make_pair(train::PreviousTokenLoss(taps), taps[0].probs);
  };
  auto [loss, probs] = loss_of(w);
  // the definition, from the probabilities one by one
  double want = 0;
  const int64_t T = t.size(1);
  for (int64_t q = 1; q < T; ++q) want -= std::log(probs[0][q][q - 1].item<double>() + 1e-9);
  EXPECT_NEAR(loss.item<double>(), want / double(T - 1), 1e-12);
  loss.backward();
  auto loss_only = [&](const WeightMap& m) { return loss_of(m).first; };
  for (const char* name : {"layer00.q_proj", "layer00.k_norm", "embedding"})
    ExpectGradientMatchesFiniteDifference(w, name, loss_only);
  // a later layer's weights play no part in layer 0's attention
  EXPECT_FALSE(w["layer01.q_proj"].grad().defined() &&
               w["layer01.q_proj"].grad().abs().max().item<double>() > 0);
}

// Induction targets by hand: the key after the latest earlier run of the same `match`
// tokens, per row; none for a query whose run has not occurred before.
TEST(NeedleNet, InductionTargetsPointPastTheLatestEarlierRun) {
  //                         0  1  2  3  4  5  6  7  8  9 10 11
  torch::Tensor tokens =
      torch::tensor({{5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 7}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 4, 5, 6}});
  torch::Tensor three = train::InductionTargets(tokens, 3);
  EXPECT_TRUE(torch::equal(three, torch::tensor({{-1, -1, -1, -1, -1, -1, 3, -1, -1, -1, 7, -1},
                                                 {-1, -1, -1, 3, -1, -1, -1, 7, -1, -1, -1, -1}})))
      << three;
  torch::Tensor one = train::InductionTargets(tokens, 1);
  EXPECT_TRUE(torch::equal(one[0], torch::tensor({-1, -1, -1, -1, 1, 2, 3, -1, 5, 6, 7, 11})))
      << one;
  // the loss averages -log p(target) over the queries with a target, whatever the others hold
  torch::Tensor probs = torch::full({2, 12, 12}, 0.5);
  probs[0][6][3] = 0.25;
  probs[1][3][3] = 0.125;
  std::vector<train::AttentionTap> taps = {{0, 0, probs}};
  const double want = -(std::log(0.25) + std::log(0.5) + std::log(0.125) + std::log(0.5)) / 4;
  EXPECT_NEAR(train::TargetAttentionLoss(taps, three).item<double>(), want, 1e-6);
  EXPECT_FALSE(train::TargetAttentionLoss(taps, torch::full({2, 12}, int64_t{-1})).defined());
}

// Copy targets by hand: the latest earlier start of the `match` tokens that follow the
// query, the run ending at the query at the latest; none near the end of the row.
TEST(NeedleNet, CopyTargetsPointAtTheLatestEarlierRunOfWhatFollows) {
  //                         0  1  2  3  4  5  6  7  8  9 10 11
  torch::Tensor tokens =
      torch::tensor({{5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 7}, {1, 2, 3, 1, 2, 3, 9, 1, 2, 3, 0, 0}});
  torch::Tensor three = train::CopyTargets(tokens, 3);
  EXPECT_TRUE(torch::equal(three, torch::tensor({{-1, -1, -1, 0, -1, -1, -1, 4, -1, -1, -1, -1},
                                                 {-1, -1, 0, -1, -1, -1, 3, -1, -1, -1, -1, -1}})))
      << three;
  torch::Tensor one = train::CopyTargets(tokens, 1);
  EXPECT_TRUE(torch::equal(one[0], torch::tensor({-1, -1, -1, 0, 1, 2, -1, 4, 5, 6, 10, -1})))
      << one;
  // with classes, tokens match by class: 9 stands for 5 here
  std::vector<int64_t> classes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 5};
  torch::Tensor row = torch::tensor({{5, 6, 7, 1, 9, 6, 7, 0}});
  EXPECT_TRUE(torch::equal(train::CopyTargets(row, 3, classes),
                           torch::tensor({{-1, -1, -1, 0, -1, -1, -1, -1}})));
  EXPECT_TRUE(
      torch::equal(train::CopyTargets(row, 3), torch::tensor({{-1, -1, -1, -1, -1, -1, -1, -1}})));
}

// The initial weights have the layout's shapes and the official starting values.
TEST(NeedleNet, InitialWeightsFollowTheOfficialInit) {
  FixtureNet f = LoadFixture("tiny");
  WeightMap w = train::InitialWeights(f.geometry, 7);
  for (auto& [name, t] : f.weights) {
    if (name.rfind("heads", 0) == 0 || name.find("_head") != std::string::npos) continue;
    ASSERT_TRUE(w.count(name)) << name;
    EXPECT_EQ(w[name].sizes(), t.sizes()) << name;
  }
  EXPECT_NEAR(w["embedding"].std().item<double>(), 0.02, 0.002);
  EXPECT_EQ(w["layer00.d1"].min().item<float>(), 1.0f);
  EXPECT_EQ(w["mhc_b_res"][0][1][1].item<float>(), 4.0f);
  EXPECT_EQ(w["mhc_b_res"][0][0][1].item<float>(), 0.0f);
  EXPECT_TRUE(
      torch::equal(train::InitialWeights(f.geometry, 7)["layer00.q_proj"], w["layer00.q_proj"]));
  // and they run: the loss of a fresh model is close to ln(vocab)
  NeedleNet net(f.geometry);
  torch::NoGradGuard no_grad;
  std::vector<int64_t> tokens = FixtureTokens64("tiny", "s2");
  torch::Tensor t = torch::tensor(tokens).unsqueeze(0);
  const double loss = train::NextTokenLoss(net.Logits(t, w), t).item<double>();
  EXPECT_NEAR(loss, std::log(double(f.geometry.vocab)), 0.5);
}

}  // namespace
}  // namespace cact::testing
