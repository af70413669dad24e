// Saving and restoring a forward's sequence state: a prefix fed once and restored gives,
// for the same continuation, bit-identical logits and hidden states to feeding it again;
// on every path, both fixtures, with a window and sink and without; and a state is only
// accepted by the forward that saved it.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>

#include "engine/forward_paths.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

struct Case {
  std::string kase, path;
  AttentionWindow attn;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.kase << " " << c.path << " window " << c.attn.window << " sink " << c.attn.sink;
}

class ForwardState : public ::testing::TestWithParam<Case> {};

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

TEST_P(ForwardState, RestoredPrefixContinuesBitIdentically) {
  const Case& c = GetParam();
  const Model& model = FixtureModel(c.kase);
  ForwardOptions opt;
  opt.attn = c.attn;
  opt.keep_hidden = true;
  opt.threads = 2;
  absl::StatusOr<std::unique_ptr<Forward>> made = MakeForwardPath(model, c.path, opt);
  ASSERT_TRUE(made.ok()) << made.status();
  Forward& f = **made;
  const std::vector<int32_t> all = FixtureTokens(c.kase, "s2");
  ASSERT_GT(all.size(), 12u);
  const size_t p = all.size() / 2;
  const std::span<const int32_t> prefix(all.data(), p), rest(all.data() + p, all.size() - p);

  // Fed without a saved state: prefix, then the rest.
  f.Reset();
  ASSERT_TRUE(f.Feed(prefix, nullptr, false).ok());
  std::unique_ptr<Forward::State> saved = f.Save();
  ASSERT_NE(saved, nullptr);
  std::vector<float> want, got, step_want, step_got;
  ASSERT_TRUE(f.Feed(rest, &want, true).ok());
  const int32_t next[1] = {all[3]};
  ASSERT_TRUE(f.Feed(next, &step_want, false).ok());
  const std::vector<float> hidden_want = f.hidden_by_position();

  // Splitting the prompt at the prefix changes nothing: one Feed of everything gives the
  // same logits for the rest (so reusing a prefix is invisible in the results).
  std::vector<float> whole;
  f.Reset();
  ASSERT_TRUE(f.Feed(all, &whole, true).ok());
  const size_t V = model.vocab();
  EXPECT_TRUE(BitEqual(std::vector<float>(whole.begin() + p * V, whole.end()), want))
      << c.kase << " " << c.path;

  // Something else fed in between, then the prefix restored: the same continuation.
  for (int round = 0; round < 2; ++round) {
    f.Reset();
    ASSERT_TRUE(f.Feed(rest, nullptr, false).ok());
    ASSERT_TRUE(f.Restore(*saved).ok());
    EXPECT_EQ(f.position(), p);
    ASSERT_TRUE(f.Feed(rest, &got, true).ok());
    ASSERT_TRUE(f.Feed(next, &step_got, false).ok());
    EXPECT_TRUE(BitEqual(got, want)) << c.kase << " " << c.path << " round " << round;
    EXPECT_TRUE(BitEqual(step_got, step_want)) << c.kase << " " << c.path;
    EXPECT_TRUE(BitEqual(f.hidden_by_position(), hidden_want)) << c.kase << " " << c.path;
  }

  // A state belongs to the forward that saved it.
  absl::StatusOr<std::unique_ptr<Forward>> other = MakeForwardPath(model, c.path, opt);
  ASSERT_TRUE(other.ok());
  const absl::Status st = (*other)->Restore(*saved);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
}

INSTANTIATE_TEST_SUITE_P(Paths, ForwardState,
                         ::testing::Values(Case{"tiny", "ref", {}}, Case{"tiny", "fast", {}},
                                           Case{"tiny", "fast-int8", {}}, Case{"odd", "ref", {}},
                                           Case{"odd", "fast", {}}, Case{"tiny", "fast", {8, 2}},
                                           Case{"odd", "fast", {8, 2}},
                                           Case{"tiny", "ref", {8, 2}}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return i.param.kase + "_" +
                                  (i.param.path == "fast-int8" ? std::string("fastint8")
                                                               : i.param.path) +
                                  (i.param.attn.window ? "_window" : "");
                         });

}  // namespace
}  // namespace cact::testing
