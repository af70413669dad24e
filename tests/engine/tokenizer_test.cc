// The tokenizer against libsentencepiece: the fixtures' 28 cases (ids and decoded text
// recorded from SentencePiece), and a few hundred KB of Debian text plus unicode, whitespace
// and invalid-UTF-8 stress strings encoded at test time by the Python sentencepiece module
// (tests/engine/sp_oracle.py) with the fixtures' models and the 8192-piece needle2 model.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/text/tokenizer.h"
#include "engine_test_util.h"
#include "formats/cact/cact_file.h"
#include "formats/sentencepiece_model.h"

namespace cact::testing {
namespace {

Tokenizer FixtureTokenizer(const std::string& kase) {
  const Model& m = FixtureModel(kase);
  auto t = Tokenizer::FromBytes(m.file().tokenizer_blob(), m.path());
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

std::string Show(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += std::to_string(x) + ",";
  return s;
}

TEST(Tokenizer, FixtureCasesMatchSentencePiece) {
  for (const std::string& kase : FixtureCases()) {
    Tokenizer tok = FixtureTokenizer(kase);
    std::ifstream f(Fixture(kase, "tokenizer_cases.json"));
    const nlohmann::json j = nlohmann::json::parse(f);
    ASSERT_GE(j.at("cases").size(), 28u);
    for (const auto& c : j.at("cases")) {
      const std::string text = c.at("text");
      const auto want = c.at("sentencepiece").get<std::vector<int32_t>>();
      const std::vector<int32_t> got = tok.Encode(text);
      EXPECT_EQ(got, want) << kase << " text=[" << text << "] got " << Show(got);
      EXPECT_EQ(tok.EncodeAsPieces(text),
                c.at("pieces_sentencepiece").get<std::vector<std::string>>())
          << kase << " " << text;
      EXPECT_EQ(tok.Decode(want), c.at("decode_sentencepiece").get<std::string>())
          << kase << " " << text;
    }
    const auto& ids = j.at("special_ids");
    EXPECT_EQ(tok.pad_id(), ids.at("pad").get<int>());
    EXPECT_EQ(tok.eos_id(), ids.at("eos").get<int>());
    EXPECT_EQ(tok.bos_id(), ids.at("bos").get<int>());
    EXPECT_EQ(tok.PieceToId("<tool_call>"), ids.at("<tool_call>").get<int>());
  }
}

// Strings that exercise the normalizer and the byte fallback (written to files as raw bytes).
std::vector<std::string> StressStrings() {
  return {
      "",
      " ",
      "\n\n\t  \r\n",
      "a  b   c    d",
      "<|im_start|>system\nYou are "
      "helpful.<|im_end|>\n<|im_start|>user\n<tools>[{\"name\":\"f\"}]</tools>\nq<|im_end|>\n",
      "<|im_start|><|im_start|>x<|im_end|><think></think>",
      "<|im_start<|im_end|>>",
      "<tools> <tools>  </tools>",
      "\xE2\x96\x81 literal lower one eighth block \xE2\x96\x81\xE2\x96\x81",
      "\xEF\xBF\xBD replacement char and invalid \xFF\xFE bytes \xC3( \xE2\x82 \xF0\x9F\x98",
      "overlong \xC0\xAF surrogate \xED\xA0\x80 beyond \xF4\x90\x80\x80 end",
      std::string("nul \0 inside", 12),
      "Z\xCC\x8A combining, \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 ZWJ, "
      "\xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9",
      "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX! 0123456789",
      "x",
  };
}

// Regular files of Debian text (a few hundred KB), deduplicated by path.
std::vector<std::string> DebianTexts() {
  std::vector<std::string> files;
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  for (const char* f : {"/usr/share/doc/publicsuffix/examples/test_psl.txt",
                        "/usr/share/doc/procps/README.Debian", "/usr/share/doc/file/README.Debian"})
    if (fs::is_regular_file(f, ec)) files.push_back(f);
  std::sort(files.begin(), files.end());
  return files;
}

struct OracleResult {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> decoded;
};

OracleResult RunOracle(const std::string& model, const std::vector<std::string>& files,
                       const TempDir& dir) {
  std::string cmd = Python() + " " + std::string(CACT_SOURCE_DIR) + "/tests/engine/sp_oracle.py " +
                    model + " " + (dir / "oracle.json");
  for (const std::string& f : files) cmd += " '" + f + "'";
  CommandResult r = cact::testing::Run(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(dir / "oracle.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  return {j.at("ids").get<std::vector<std::vector<int32_t>>>(),
          j.at("decoded").get<std::vector<std::string>>()};
}

void CheckAgainstOracle(const Tokenizer& tok, const std::string& model_path) {
  TempDir dir;
  std::vector<std::string> files;
  const std::vector<std::string> stress = StressStrings();
  for (size_t i = 0; i < stress.size(); ++i) {
    files.push_back(dir / ("stress" + std::to_string(i)));
    WriteAll(files.back(), std::vector<uint8_t>(stress[i].begin(), stress[i].end()));
  }
  size_t text_bytes = 0;
  for (const std::string& f : DebianTexts()) {
    files.push_back(f);
    text_bytes += std::filesystem::file_size(f);
  }
  EXPECT_GE(text_bytes, 100000u) << "too little Debian text on this machine";
  const OracleResult want = RunOracle(model_path, files, dir);
  ASSERT_EQ(want.ids.size(), files.size());
  size_t tokens = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::vector<uint8_t> bytes = ReadAll(files[i]);
    const std::string text(bytes.begin(), bytes.end());
    const std::vector<int32_t> got = tok.Encode(text);
    tokens += got.size();
    if (got != want.ids[i]) {
      size_t at = 0;
      while (at < got.size() && at < want.ids[i].size() && got[at] == want.ids[i][at]) ++at;
      ADD_FAILURE() << files[i] << ": ids differ from sentencepiece at token " << at << " of "
                    << want.ids[i].size() << " (got " << got.size() << ")";
    }
    EXPECT_EQ(tok.Decode(want.ids[i]), want.decoded[i]) << files[i];
  }
  ::testing::Test::RecordProperty("tokens_compared", std::to_string(tokens));
  ::testing::Test::RecordProperty("text_bytes", std::to_string(text_bytes));
}

TEST(Tokenizer, DebianTextMatchesSentencePieceWithNeedle2Model) {
  const std::string model = std::string(CACT_SOURCE_DIR) + "/quant/data/needle2_tokenizer.model";
  auto blob = ReadSentencePieceModel(model);
  ASSERT_TRUE(blob.ok()) << blob.status();
  auto tok = Tokenizer::FromBlob(std::move(blob).value());
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_EQ(tok->vocab_size(), 8192);
  CheckAgainstOracle(*tok, model);
}

TEST(Tokenizer, DebianTextMatchesSentencePieceWithFixtureModels) {
  for (const std::string& kase : FixtureCases())
    CheckAgainstOracle(FixtureTokenizer(kase), Fixture(kase, "tokenizer.model"));
}

TEST(Tokenizer, RoundTripsValidText) {
  Tokenizer tok = FixtureTokenizer("tiny");
  for (const std::string s : {"Hello, world", "  two", "tab\there\n",
                              "caf\xC3\xA9 \xF0\x9F\x98\x80", "<|im_start|>user\nx<|im_end|>"})
    EXPECT_EQ(tok.Decode(tok.Encode(s)), s);
  // Control ids vanish; the dummy-prefix space is stripped only at the start.
  std::vector<int32_t> ids = {tok.bos_id()};
  for (int32_t id : tok.Encode("a b")) ids.push_back(id);
  ids.push_back(tok.eos_id());
  EXPECT_EQ(tok.Decode(ids), "a b");
}

TEST(Tokenizer, RejectsInconsistentBlob) {
  TokenizerBlob blob;
  blob.pieces.resize(2);
  EXPECT_FALSE(Tokenizer::FromBlob(blob).ok());  // special ids outside the 2 pieces
}

}  // namespace
}  // namespace cact::testing
