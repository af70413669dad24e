// Saving and restoring a forward's sequence state: a prefix fed once and restored gives,
// for the same continuation, bit-identical logits and hidden states to feeding it again;
// on every path, both fixtures, with a window and sink and without; and a state is only
// accepted by the forward that saved it. As bytes (the prompt cache) a state carries over to
// another forward of the same options, and damaged bytes are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
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
  EXPECT_EQ((*other)->StateBytes(*saved).status().code(), absl::StatusCode::kFailedPrecondition);

  // As bytes, read by another forward of the same options (another process, through the
  // prompt cache): the same continuation, and the same bytes written back.
  absl::StatusOr<std::string> bytes = f.StateBytes(*saved);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<std::unique_ptr<Forward::State>> read = (*other)->StateFromBytes(*bytes, "s");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_TRUE((*other)->Restore(**read).ok());
  EXPECT_EQ((*other)->position(), p);
  EXPECT_EQ((*other)->StateBytes(**read).value_or(""), *bytes);
  ASSERT_TRUE((*other)->Feed(rest, &got, true).ok());
  ASSERT_TRUE((*other)->Feed(next, &step_got, false).ok());
  EXPECT_TRUE(BitEqual(got, want)) << c.kase << " " << c.path << " from bytes";
  EXPECT_TRUE(BitEqual(step_got, step_want)) << c.kase << " " << c.path << " from bytes";
  EXPECT_TRUE(BitEqual((*other)->hidden_by_position(), hidden_want)) << c.kase << " " << c.path;

  // Every truncation and one byte more are refused, naming the field and offset.
  const std::string& b = *bytes;
  for (size_t cut = 0; cut < b.size(); cut += cut < 64 ? 1 : 997) {
    absl::StatusOr<std::unique_ptr<Forward::State>> r =
        (*other)->StateFromBytes(std::string_view(b).substr(0, cut), "s");
    ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << "cut at " << cut;
    EXPECT_NE(r.status().message().find("at offset"), std::string_view::npos) << r.status();
  }
  EXPECT_EQ((*other)->StateFromBytes(b + '\0', "s").status().code(),
            absl::StatusCode::kDataLoss);
  // An id outside the vocabulary (the first id follows the u32 count).
  std::string bad = b;
  const int32_t vocab = int32_t(model.vocab());
  std::memcpy(&bad[4], &vocab, 4);
  absl::StatusOr<std::unique_ptr<Forward::State>> r = (*other)->StateFromBytes(bad, "s");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("s: token ids at offset 4: id"), std::string_view::npos)
      << r.status();
  // A count past max_seq_len.
  bad = b;
  const uint32_t too_many = model.max_seq_len() + 1;
  std::memcpy(&bad[0], &too_many, 4);
  EXPECT_EQ((*other)->StateFromBytes(bad, "s").status().code(), absl::StatusCode::kDataLoss);
  // A non-finite float in the last value written (hidden states).
  bad = b;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bad[bad.size() - 4], &nan, 4);
  r = (*other)->StateFromBytes(bad, "s");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("non-finite"), std::string_view::npos) << r.status();
  // The state of a forward that records hidden states is not one for a forward that does not.
  ForwardOptions lean = opt;
  lean.keep_hidden = false;
  absl::StatusOr<std::unique_ptr<Forward>> without = MakeForwardPath(model, c.path, lean);
  ASSERT_TRUE(without.ok());
  r = (*without)->StateFromBytes(b, "s");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("hidden flag"), std::string_view::npos) << r.status();
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
