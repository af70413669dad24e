// Scoring tool calls against the expected ones, on hand-made cases whose answers are worked
// out by hand below, and the Wilson interval against values computed by hand (z = 1.96).
#include <gtest/gtest.h>

#include "engine/toolcall/tool_call_eval.h"

namespace cact {
namespace {

using Json = nlohmann::json;

CallScore Score(const char* expected, const char* got) {
  return ScoreCalls(Json::parse(expected), Json::parse(got));
}

TEST(ScoreCalls, EqualAsJsonValues) {
  // Key order and 1 vs 1.0 do not matter; call order does not matter (a multiset).
  const CallScore s =
      Score(R"([{"name":"a","arguments":{"x":1,"y":"s"}},{"name":"b","arguments":{}}])",
            R"([{"arguments":{},"name":"b"},{"name":"a","arguments":{"y":"s","x":1.0}}])");
  EXPECT_TRUE(s.exact);
  EXPECT_TRUE(s.names_right);
  EXPECT_FALSE(s.refusal_expected);
  EXPECT_FALSE(s.refused);
  EXPECT_EQ(s.arg_hits, 2u);
  EXPECT_EQ(s.arg_expected, 2u);
  EXPECT_EQ(s.arg_answered, 2u);
}

TEST(ScoreCalls, AWrongValueIsNotExactButTheNamesAreRight) {
  const CallScore s = Score(R"([{"name":"w","arguments":{"city":"Oslo","unit":"C"}}])",
                            R"([{"name":"w","arguments":{"city":"Bergen","unit":"C","x":2}}])");
  EXPECT_FALSE(s.exact);
  EXPECT_TRUE(s.names_right);
  EXPECT_EQ(s.arg_hits, 1u);      // unit
  EXPECT_EQ(s.arg_expected, 2u);  // city, unit
  EXPECT_EQ(s.arg_answered, 3u);  // city, unit, x
}

TEST(ScoreCalls, MultisetsCountDuplicates) {
  const char* two = R"([{"name":"a","arguments":{"k":1}},{"name":"a","arguments":{"k":1}}])";
  const char* one = R"([{"name":"a","arguments":{"k":1}}])";
  EXPECT_TRUE(Score(two, two).exact);
  EXPECT_FALSE(Score(two, one).exact);
  EXPECT_FALSE(Score(two, one).names_right);
  EXPECT_FALSE(Score(one, two).exact);
  // Same names, swapped values across two calls of one tool: names right, not exact.
  const CallScore s =
      Score(R"([{"name":"a","arguments":{"k":1}},{"name":"a","arguments":{"k":2}}])",
            R"([{"name":"a","arguments":{"k":2}},{"name":"a","arguments":{"k":1}}])");
  EXPECT_TRUE(s.exact);  // a multiset: the same two calls
  const CallScore t =
      Score(R"([{"name":"a","arguments":{"k":1}},{"name":"b","arguments":{"k":2}}])",
            R"([{"name":"a","arguments":{"k":2}},{"name":"b","arguments":{"k":1}}])");
  EXPECT_FALSE(t.exact);
  EXPECT_TRUE(t.names_right);
  EXPECT_EQ(t.arg_hits, 0u);
}

TEST(ScoreCalls, Refusals) {
  const CallScore right = Score("[]", "[]");
  EXPECT_TRUE(right.exact && right.names_right && right.refusal_expected && right.refused);
  const CallScore wrong = Score("[]", R"([{"name":"a","arguments":{}}])");
  EXPECT_FALSE(wrong.exact);
  EXPECT_TRUE(wrong.refusal_expected);
  EXPECT_FALSE(wrong.refused);
  const CallScore false_refusal = Score(R"([{"name":"a","arguments":{"k":1}}])", "[]");
  EXPECT_FALSE(false_refusal.exact);
  EXPECT_TRUE(false_refusal.refused);
  EXPECT_FALSE(false_refusal.refusal_expected);
  EXPECT_EQ(false_refusal.arg_expected, 1u);
  EXPECT_EQ(false_refusal.arg_answered, 0u);
}

TEST(ScoreCalls, NestedValuesCompareWhole) {
  EXPECT_TRUE(Score(R"([{"name":"a","arguments":{"o":{"p":[1,2],"q":null}}}])",
                    R"([{"name":"a","arguments":{"o":{"q":null,"p":[1.0,2]}}}])")
                  .exact);
  EXPECT_FALSE(Score(R"([{"name":"a","arguments":{"o":{"p":[1,2]}}}])",
                     R"([{"name":"a","arguments":{"o":{"p":[2,1]}}}])")
                   .exact);
}

TEST(Rate, WilsonInterval) {
  // p = 8/10: center (0.8 + 1.9208/10) / 1.38416 = 0.71672; half-width
  // 1.96 * sqrt(0.016 + 0.009604) / 1.38416 = 0.22658.
  const auto [lo, hi] = Rate{8, 10}.Interval();
  EXPECT_NEAR(lo, 0.49014, 1e-4);
  EXPECT_NEAR(hi, 0.94330, 1e-4);
  const auto [zlo, zhi] = Rate{0, 5}.Interval();
  EXPECT_EQ(zlo, 0.0);
  EXPECT_NEAR(zhi, 0.43448, 1e-4);  // 3.8416/5 / (1 + 3.8416/5) = 0.43448
  EXPECT_EQ(Rate{}.Interval(), (std::pair<double, double>{0.0, 1.0}));
}

TEST(Summarize, CountsEachRateOverItsOwnExamples) {
  std::vector<EvalOutcome> o(3);
  o[0].valid = true;
  o[0].score = Score("[]", "[]");
  o[1].valid = true;
  o[1].score = Score(R"([{"name":"a","arguments":{"k":1}}])", "[]");
  o[2].valid = false;
  o[2].score =
      Score(R"([{"name":"a","arguments":{"k":1}}])", R"([{"name":"a","arguments":{"k":1}}])");
  o[0].ms = 1, o[1].ms = 2, o[2].ms = 3;
  const EvalTotals t = Summarize(o);
  EXPECT_EQ(t.examples, 3u);
  EXPECT_EQ(t.valid.hits, 2u);
  EXPECT_EQ(t.exact.hits, 2u);
  EXPECT_EQ(t.refusals_right.hits, 1u);
  EXPECT_EQ(t.refusals_right.total, 1u);
  EXPECT_EQ(t.false_refusals.hits, 1u);
  EXPECT_EQ(t.false_refusals.total, 2u);
  EXPECT_EQ(t.arg_recall.hits, 1u);
  EXPECT_EQ(t.arg_recall.total, 2u);
  EXPECT_EQ(t.arg_precision.total, 1u);
  EXPECT_EQ(t.ms_total, 6.0);
}

}  // namespace
}  // namespace cact
