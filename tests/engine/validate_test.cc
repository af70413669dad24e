// The validator on known differences: a path against itself (zero error, pass), a wrapper
// that perturbs logits by a known relative amount, and a different attention window
// (large disagreement, must fail). Plus RelativeL2 and KL on hand-computed values.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/eval/validate.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

// Reference forward whose logits are scaled by (1 + eps): relative L2 is exactly eps.
class ScaledForward : public Forward {
 public:
  ScaledForward(std::unique_ptr<Forward> inner, float eps) : inner_(std::move(inner)), eps_(eps) {}
  void Reset() override { inner_->Reset(); }
  absl::Status Feed(std::span<const int32_t> t, std::vector<float>* logits, bool all) override {
    auto st = inner_->Feed(t, logits, all);
    if (logits)
      for (float& v : *logits) v *= 1.0f + eps_;
    return st;
  }
  uint32_t position() const override { return inner_->position(); }
  const std::vector<float>& hidden() const override { return inner_->hidden(); }
  const std::vector<float>& hidden_by_position() const override {
    return inner_->hidden_by_position();
  }
  std::string name() const override { return "scaled"; }

 private:
  std::unique_ptr<Forward> inner_;
  float eps_;
};

TEST(Validate, HandValues) {
  EXPECT_NEAR(RelativeL2(std::vector<float>{3, 4}, std::vector<float>{3, 0}), 4.0 / 3.0, 1e-12);
  EXPECT_EQ(KlDivergence(std::vector<float>{1, 2, 3}, std::vector<float>{1, 2, 3}), 0.0);
  // p = softmax(0, 0) = (.5, .5), q = softmax(0, log 3) = (.25, .75):
  // KL = .5 log(.5/.25) + .5 log(.5/.75).
  const double want = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  EXPECT_NEAR(KlDivergence(std::vector<float>{0, 0}, std::vector<float>{0, float(std::log(3.0))}),
              want, 1e-7);
}

TEST(Validate, SamePathAgreesExactly) {
  const Model& model = FixtureModel("tiny");
  ForwardOptions opt;
  opt.keep_hidden = true;
  auto a = MakeReferenceForward(model, opt);
  auto b = MakeReferenceForward(model, opt);
  const std::vector<int32_t> tokens = FixtureTokens("tiny", "s0");
  auto r = ValidateForwards(*a, *b, tokens, 12, model.num_layers());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok()) << r->ToText();
  EXPECT_EQ(r->positions, tokens.size() + 12);
  EXPECT_EQ(r->logits_rel_l2, 0.0);
  EXPECT_EQ(r->top1_agreement, 1.0);
  EXPECT_EQ(r->kl_max, 0.0);
  ASSERT_EQ(r->layer_rel_l2.size(), model.num_layers());
  for (double v : r->layer_rel_l2) EXPECT_EQ(v, 0.0);
}

TEST(Validate, NonFiniteLogitsFailEvenUnderTheLoosestBounds) {
  const Model& model = FixtureModel("odd");
  auto ref = MakeReferenceForward(model, {});
  ScaledForward nan(MakeReferenceForward(model, {}), std::nanf(""));
  ValidateThresholds loose;
  loose.max_logits_rel_l2 = loose.max_kl_mean = loose.max_kl_max = 1e300;
  loose.min_top1 = 0;
  auto r = ValidateForwards(*ref, nan, FixtureTokens("odd", "s1"), 4, model.num_layers(), loose);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->ok()) << r->ToText();
  EXPECT_TRUE(std::isnan(r->kl_max)) << r->ToText();
  // Relative L2 and both KL figures are NaN: each is its own failure.
  EXPECT_EQ(r->failures.size(), 3u) << r->ToText();
  EXPECT_EQ(r->ToText().find("PASS"), std::string::npos) << r->ToText();
}

TEST(Validate, MeasuresAKnownPerturbation) {
  const Model& model = FixtureModel("odd");
  auto ref = MakeReferenceForward(model, {});
  ScaledForward cand(MakeReferenceForward(model, {}), 0.002f);
  auto r = ValidateForwards(*ref, cand, FixtureTokens("odd", "s1"), 8, model.num_layers());
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->logits_rel_l2, 0.002, 1e-6);
  EXPECT_EQ(r->top1_agreement, 1.0);  // scaling keeps the argmax
  EXPECT_GT(r->kl_mean, 0.0);
  EXPECT_TRUE(r->ok()) << r->ToText();
  EXPECT_TRUE(r->layer_rel_l2.empty());  // no hidden states kept

  ScaledForward far(MakeReferenceForward(model, {}), 0.02f);
  auto bad = ValidateForwards(*ref, far, FixtureTokens("odd", "s1"), 0, model.num_layers());
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->ok());
  EXPECT_NE(bad->ToText().find("FAIL: logits relative L2"), std::string::npos) << bad->ToText();
}

TEST(Validate, DifferentWindowFails) {
  const Model& model = FixtureModel("tiny");
  ForwardOptions full, windowed;
  full.keep_hidden = windowed.keep_hidden = true;
  windowed.attn = {8, 2};
  auto a = MakeReferenceForward(model, full);
  auto b = MakeReferenceForward(model, windowed);
  auto r = ValidateForwards(*a, *b, FixtureTokens("tiny", "s2"), 4, model.num_layers());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok());
  EXPECT_GT(r->logits_rel_l2, 0.05);
  // Layers see the window from the first one; the error is visible everywhere.
  for (double v : r->layer_rel_l2) EXPECT_GT(v, 1e-3);
  EXPECT_NE(r->ToJson().find("\"pass\":false"), std::string::npos);
}

}  // namespace
}  // namespace cact::testing
