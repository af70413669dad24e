// The SentencePiece .model behind each fixture converts to exactly its RAW tokenizer blob.
#include "formats/sentencepiece_model.h"

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "formats/cact/cact_file.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;

class SentencePieceFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceFixtureTest, ModelConvertsToTheFilesBlob) {
  auto tok = ReadSentencePieceModel(Fixture(GetParam(), "tokenizer.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<uint8_t> blob = SerializeTokenizerBlob(*tok);
  auto want = f->tokenizer_blob();
  ASSERT_EQ(blob.size(), want.size());
  EXPECT_TRUE(std::equal(blob.begin(), blob.end(), want.begin()));
}

TEST_P(SentencePieceFixtureTest, AgreesWithPythonSentencePiece) {
  // Independent oracle: the sentencepiece Python module's view of the same model.
  auto tok = ReadSentencePieceModel(Fixture(GetParam(), "tokenizer.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  testing::TempDir dir;
  const std::string script =
      "import sentencepiece as s\n"
      "p=s.SentencePieceProcessor(model_file='" +
      Fixture(GetParam(), "tokenizer.model") +
      "')\n"
      "print(p.get_piece_size(),p.pad_id(),p.eos_id(),p.bos_id(),p.unk_id())\n"
      "for i in range(p.get_piece_size()):\n"
      "  t=4 if p.is_byte(i) else 2 if p.is_control(i) else 1 if p.is_unknown(i) else 0\n"
      "  print(i,t,repr(p.get_score(i)),p.id_to_piece(i).encode().hex())\n";
  testing::WriteAll(dir / "sp.py", std::vector<uint8_t>(script.begin(), script.end()));
  auto r = testing::Run(testing::Python() + " " + dir / "sp.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  size_t n;
  uint32_t pad, eos, bos, unk;
  in >> n >> pad >> eos >> bos >> unk;
  ASSERT_EQ(n, tok->pieces.size());
  EXPECT_EQ(pad, tok->pad_id);
  EXPECT_EQ(eos, tok->eos_id);
  EXPECT_EQ(bos, tok->bos_id);
  EXPECT_EQ(unk, tok->unk_id);
  for (size_t i = 0; i < n; ++i) {
    size_t id;
    int type;
    std::string score, hex;
    in >> id >> type >> score >> hex;
    const TokenizerPiece& p = tok->pieces[i];
    std::string got_hex;
    for (unsigned char ch : p.surface) got_hex += absl::StrFormat("%02x", ch);
    EXPECT_EQ(got_hex, hex) << i;
    EXPECT_EQ(std::stof(score), p.score) << i;
    // Python has no is_user_defined(); user-defined pieces show as normal there.
    const int ours = p.type == PieceType::kUserDefined ? 0 : int(p.type);
    EXPECT_EQ(ours, type) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SentencePieceFixtureTest, ::testing::Values("tiny", "odd"));

TEST(SentencePieceErrors, TruncatedModelNamesTheField) {
  std::vector<uint8_t> bytes = testing::ReadAll(Fixture("tiny", "tokenizer.model"));
  bytes.resize(100);
  auto tok = ParseSentencePieceModel(bytes, "tokenizer.model");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.model: protobuf"), std::string::npos)
      << tok.status();
}

TEST(SentencePieceErrors, GarbageIsRejected) {
  const std::vector<uint8_t> bytes = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01};
  auto tok = ParseSentencePieceModel(bytes, "x.model");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("protobuf field 1 length at offset 6"), std::string::npos)
      << tok.status();
}

}  // namespace
}  // namespace cact
