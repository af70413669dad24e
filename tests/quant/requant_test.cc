// cact-quant requant: unchanged widths are copied byte for byte, changed ones are
// requantized from the file's dequantized values.
#include "quant/requant.h"

#include <gtest/gtest.h>

#include "quant/tensor_values.h"
#include "rebuild_test_util.h"

namespace cact {
namespace {

using testing::Fixture;

TEST(Requant, AllFourBitToTheMixedScheme) {
  // An all-4-bit build of the tiny fixture's weights, then the default mixed scheme.
  absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture("tiny", "weights.safetensors"));
  absl::StatusOr<TokenizerBlob> tok = ReadSentencePieceModel(Fixture("tiny", "tokenizer.model"));
  ASSERT_TRUE(w.ok() && tok.ok());
  BuildRequest b;
  b.weights = &*w;
  b.tokenizer = *tok;
  b.scheme = *ParseScheme("default=4");
  RebuildReport built;
  absl::StatusOr<CactContents> four = BuildCact(b, &built);
  ASSERT_TRUE(four.ok()) << four.status();
  testing::TempDir dir;
  ASSERT_TRUE(FinishRebuild(*four, dir / "four.cact", 3, &built).ok());
  absl::StatusOr<CactFile> in = CactFile::Open(dir / "four.cact");
  ASSERT_TRUE(in.ok()) << in.status();

  RequantRequest req;
  req.input = &*in;
  req.scheme = *ParseScheme(kDefaultScheme);
  RebuildReport report;
  absl::StatusOr<CactContents> out = RequantCact(req, &report);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->tensors.size(), in->tensors().size());
  size_t copied_cq = 0, requantized = 0;
  for (size_t i = 0; i < out->tensors.size(); ++i) {
    const TensorEntry& t = in->tensors()[i];
    const TensorBlob& o = out->tensors[i];
    const TensorOutcome& r = report.tensors[i];
    std::span<const uint8_t> before = in->blob(t);
    if (!t.is_cq() || t.name == "embedding" || t.name.starts_with("mhc_phi")) {
      EXPECT_EQ(r.action, TensorAction::kCopied) << t.name;
      EXPECT_TRUE(std::equal(o.bytes.begin(), o.bytes.end(), before.begin(), before.end()))
          << t.name;
      copied_cq += t.is_cq();
      continue;
    }
    // Width 4 -> 2: the codes of the dequantized values, against the reader's codebook.
    ++requantized;
    EXPECT_EQ(r.action, TensorAction::kRequantized) << t.name;
    EXPECT_EQ(r.reason, "CQ4 g128 -> CQ2 g128 from the dequantized values");
    EXPECT_EQ(o.record.bits, 2u);
    absl::StatusOr<std::vector<float>> values = TensorValues(*in, t);
    ASSERT_TRUE(values.ok());
    const CqShape s{uint32_t(t.rows()), uint32_t(t.cols()), 128, 2};
    EXPECT_EQ(o.bytes, PackBlob(QuantizeMatrix(values->data(), s, in->CodebookFor(2, 128))))
        << t.name;
    EXPECT_GT(r.rel_mse, 0.0);
  }
  EXPECT_EQ(copied_cq, 4u);
  EXPECT_EQ(requantized, 26u);
  EXPECT_EQ(report.notes.size(), 1u);
  // The result is a valid file of the mixed layout.
  std::vector<uint8_t> bytes = testing::Serialize(*out);
  absl::StatusOr<CactFile> back = CactFile::FromBytes(FileBytes::FromBuffer("requant", bytes));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Find("layer00.q_proj")->record.bits, 2u);
}

TEST(Requant, SameSchemeCopiesEverything) {
  for (const std::string& kase : testing::FixtureCases()) {
    absl::StatusOr<CactFile> in = CactFile::Open(Fixture(kase, "model.cact"));
    ASSERT_TRUE(in.ok());
    RequantRequest req;
    req.input = &*in;
    req.scheme = *ParseScheme(kase == "odd" ? "embedding=4,mhc=3,default=2" : kDefaultScheme);
    RebuildReport report;
    absl::StatusOr<CactContents> out = RequantCact(req, &report);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(testing::Serialize(*out), testing::FixtureBytes(kase));
    EXPECT_EQ(report.Count(TensorAction::kCopied), in->tensors().size());
  }
}

}  // namespace
}  // namespace cact
