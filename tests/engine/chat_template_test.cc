// The chat template against the official renderer's rules (tests/engine/chat_oracle.py:
// json.dumps(separators=(",", ":"), ensure_ascii=False), stripped optional system turn, one
// SentencePiece encode with BOS in front), on the needle2 tokenizer.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/text/chat_template.h"
#include "engine_test_util.h"
#include "formats/sentencepiece_model.h"

namespace cact::testing {
namespace {

std::string Needle2TokenizerPath() {
  return std::string(CACT_SOURCE_DIR) + "/quant/data/needle2_tokenizer.model";
}

Tokenizer Needle2Tokenizer() {
  auto blob = ReadSentencePieceModel(Needle2TokenizerPath());
  EXPECT_TRUE(blob.ok()) << blob.status();
  auto tok = Tokenizer::FromBlob(std::move(blob).value());
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

void WriteText(const std::string& path, const std::string& s) {
  WriteAll(path, std::vector<uint8_t>(s.begin(), s.end()));
}

struct ChatCase {
  std::string tools, query;
  std::optional<std::string> system;
};

TEST(ChatTemplate, MatchesOfficialRendering) {
  const Tokenizer tok = Needle2Tokenizer();
  const std::vector<ChatCase> cases = {
      {R"([{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])",
       "What is the weather in Paris?", std::nullopt},
      // Pretty-printed input, keys out of alphabetical order, unicode, escapes, numbers.
      {"[\n  {\"zeta\": 1, \"alpha\": [1.5, -2e-05, 10000000000000000.0, true, null],\n"
       "   \"name\": \"r\\u00e9server_h\\u00f4tel\", \"desc\": \"line\\nbreak \\\"q\\\" \\\\ "
       "\\u0001 \xE6\x97\xA5\"}\n]",
       "  R\xC3\xA9serve une chambre \xC3\xA0 Lyon  ", std::string("  You are a tool caller.\n")},
      {"[]", "hello", std::string(" \n\t ")},  // blank system: no system turn
      {R"([{"name":"f","parameters":{}}])", "<tool_call> inside the query", std::string("sys")},
  };
  for (const ChatCase& c : cases) {
    TempDir dir;
    WriteText(dir / "tools.json", c.tools);
    WriteText(dir / "query.txt", c.query);
    if (c.system) WriteText(dir / "system.txt", *c.system);
    CommandResult r = cact::testing::Run(
        Python() + " " + CACT_SOURCE_DIR + "/tests/engine/chat_oracle.py " +
        Needle2TokenizerPath() + " " + (dir / "tools.json") + " " + (dir / "query.txt") + " " +
        (c.system ? dir / "system.txt" : std::string("-")) + " " + (dir / "out.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream f(dir / "out.json");
    const nlohmann::json want = nlohmann::json::parse(f);

    std::optional<std::string_view> system;
    if (c.system) system = *c.system;
    auto got = BuildChatPrompt(tok, c.tools, c.query, system);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->text, want.at("text").get<std::string>());
    EXPECT_EQ(got->ids, want.at("ids").get<std::vector<int32_t>>());
    EXPECT_EQ(got->tools_prefix, want.at("tools_prefix").get<uint32_t>());
    EXPECT_EQ(got->ids.at(got->tools_prefix - 1), tok.PieceToId("</tools>"));
  }
}

TEST(ChatTemplate, RejectsMalformedTools) {
  const Tokenizer tok = Needle2Tokenizer();
  for (const char* bad : {"", "[", "{\"name\": \"f\"}", "[{\"a\":1},]", "nope", "\"str\""}) {
    auto p = BuildChatPrompt(tok, bad, "q");
    EXPECT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace cact::testing
