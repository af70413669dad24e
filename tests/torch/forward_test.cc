// The exported TorchScript module, loaded with torch::jit::load and run from C++, against
// (1) the official decode's logits and hidden states in the fixtures, window/sink cases
// included, and (2) the engine's FP32 reference path (MakeReferenceForward), which was
// written separately from the same spec. Tolerance: max|diff| <= 1e-4 x max|reference|.
// Both sides are FP32 and differ only in summation order (measured ~4e-7 relative); a
// wrong RoPE pairing, offset or mask moves logits by more than 1e-2 of their range.
#include <gtest/gtest.h>

#include "engine/forward.h"
#include "engine/model.h"
#include "engine/probe_heads.h"
#include "support/decode_cases.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

using Case = DecodeCase;

std::optional<int64_t> TorchWindow(const Case& c) {
  return c.window ? std::optional<int64_t>(c.window) : std::nullopt;
}

// One process per fixture (ctest runs every test in its own process, and each loads
// libtorch and exports the model), looping over the sequences and window cases.
class TorchForward : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchForward, MatchesOfficialLogitsAndHidden) {
  ExportedCase& ex = Exported(GetParam());
  ASSERT_TRUE(ex.model);
  for (const Case& c : DecodeCasesOf(GetParam())) {
    SCOPED_TRACE(c.kase + " " + c.suffix());
    const std::vector<int64_t> tokens = FixtureTokens64(c.kase, c.seq);
    auto logits = ex.model->Logits(tokens, 1, TorchWindow(c), c.sink);
    ASSERT_TRUE(logits.ok()) << logits.status();
    std::vector<size_t> shape;
    std::vector<float> want = NpyData(Fixture(c.kase, "logits_" + c.suffix() + ".npy"), &shape);
    ASSERT_EQ(shape.size(), 2u);
    ASSERT_EQ(logits->size(), shape[0] * shape[1]);
    const double err = MaxRelErr(*logits, want);
    EXPECT_LE(err, 1e-4);
    RecordProperty("logits_relerr_" + c.suffix(), std::to_string(err));

    auto hidden = ex.model->HiddenStates(tokens, 1, TorchWindow(c), c.sink);
    ASSERT_TRUE(hidden.ok()) << hidden.status();
    std::vector<float> hwant = NpyData(Fixture(c.kase, "hidden_" + c.suffix() + ".npy"));
    EXPECT_LE(MaxRelErr(*hidden, hwant), 1e-4);
  }
}

TEST_P(TorchForward, MatchesEngineReferencePath) {
  ExportedCase& ex = Exported(GetParam());
  ASSERT_TRUE(ex.model);
  auto model = Model::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(model.ok()) << model.status();
  for (const Case& c : DecodeCasesOf(GetParam())) {
    SCOPED_TRACE(c.kase + " " + c.suffix());
    const std::vector<int64_t> tokens = FixtureTokens64(c.kase, c.seq);
    auto torch_logits = ex.model->Logits(tokens, 1, TorchWindow(c), c.sink);
    ASSERT_TRUE(torch_logits.ok()) << torch_logits.status();
    ForwardOptions opt;
    opt.attn = {c.window, c.sink};
    auto ref = MakeReferenceForward(**model, opt);
    std::vector<int32_t> tokens32(tokens.begin(), tokens.end());
    std::vector<float> ref_logits;
    ASSERT_TRUE(ref->Feed(tokens32, &ref_logits, true).ok());
    const double err = MaxRelErr(*torch_logits, ref_logits);
    EXPECT_LE(err, 1e-4);
    RecordProperty("engine_relerr_" + c.suffix(), std::to_string(err));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchForward, ::testing::ValuesIn(FixtureCases()));

// A window must change the logits (else the window cases above would prove nothing), and
// window=0 means plain causal like no window at all.
TEST(TorchModule, WindowArgumentIsHonoured) {
  ExportedCase& ex = Exported("tiny");
  ASSERT_TRUE(ex.model);
  const std::vector<int64_t> tokens = FixtureTokens64("tiny", "s2");
  auto full = ex.model->Logits(tokens, 1);
  auto zero = ex.model->Logits(tokens, 1, 0, 0);
  auto w8 = ex.model->Logits(tokens, 1, 8, 2);
  ASSERT_TRUE(full.ok() && zero.ok() && w8.ok());
  EXPECT_EQ(*full, *zero);
  EXPECT_GT(MaxRelErr(*w8, *full), 1e-2);
}

// Rows of a batch are independent: a [2, T] call equals two [1, T] calls.
TEST(TorchModule, BatchRowsAreIndependent) {
  ExportedCase& ex = Exported("odd");
  ASSERT_TRUE(ex.model);
  std::vector<int64_t> a = FixtureTokens64("odd", "s2"), b = FixtureTokens64("odd", "s1");
  a.resize(b.size());
  std::vector<int64_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  auto la = ex.model->Logits(a, 1), lb = ex.model->Logits(b, 1), lab = ex.model->Logits(both, 2);
  ASSERT_TRUE(la.ok() && lb.ok() && lab.ok());
  std::vector<float> joined = *la;
  joined.insert(joined.end(), lb->begin(), lb->end());
  EXPECT_LE(MaxRelErr(*lab, joined), 1e-5);
}

// Probe heads (odd has both) against the engine's implementation of the same spec section.
TEST(TorchModule, ProbeHeadsMatchEngine) {
  ExportedCase& ex = Exported("odd");
  ASSERT_TRUE(ex.model);
  ASSERT_TRUE(ex.model->HasMethod("confidence"));
  ASSERT_TRUE(ex.model->HasMethod("retrieval"));
  EXPECT_FALSE(Exported("tiny").model->HasMethod("confidence"));  // tiny has no heads
  auto model = Model::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(model.ok());
  for (const char* seq : {"s0", "s1", "s2"}) {
    const std::vector<int64_t> tokens = FixtureTokens64("odd", seq);
    ForwardOptions opt;
    opt.keep_hidden = true;
    auto ref = MakeReferenceForward(**model, opt);
    std::vector<int32_t> tokens32(tokens.begin(), tokens.end());
    ASSERT_TRUE(ref->Feed(tokens32, nullptr, false).ok());
    auto want = ComputeProbeHeads(**model, tokens32, ref->hidden());
    ASSERT_TRUE(want.ok()) << want.status();
    auto conf = ex.model->Confidence(tokens, 1);
    auto retr = ex.model->Retrieval(tokens, 1);
    ASSERT_TRUE(conf.ok() && retr.ok());
    ASSERT_EQ(conf->size(), 1u);
    ASSERT_TRUE(want->has_confidence);
    EXPECT_NEAR((*conf)[0], want->confidence, 1e-4 * std::max(1.0f, std::fabs(want->confidence)))
        << seq;
    EXPECT_LE(MaxRelErr(*retr, want->retrieval), 1e-4) << seq;
  }
}

}  // namespace
}  // namespace cact::testing
