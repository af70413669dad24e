// The chat template against the official renderer's rules (tests/engine/chat_oracle.py:
// json.dumps(separators=(",", ":"), ensure_ascii=False), stripped optional system turn, one
// SentencePiece encode with BOS in front), on the needle2 tokenizer; both releases of the
// template (v2.0.12, v2.0.9) against an oracle of each.
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/text/chat_template.h"
#include "engine/text/python_json.h"
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

// The two official releases (chat_template.h) against an independent rendering: Python's
// json.dumps with and without ensure_ascii, str.strip() or not, libsentencepiece.
constexpr const char* kTemplateOracle = R"(import json, sys
import sentencepiece as spm
model, cases, out = sys.argv[1:4]
sp = spm.SentencePieceProcessor(model_file=model)
results = []
for case in json.load(open(cases, encoding="utf-8")):
    tools = json.loads(case["tools"])
    given = case.get("system")  # None: no system argument
    per = {}
    for name, ascii in (("v2.0.12", False), ("v2.0.9", True)):
        tools_json = json.dumps(tools, separators=(",", ":"), ensure_ascii=ascii)
        system = (given or "").strip() if name == "v2.0.12" else (given or "")
        prefix = ("<|im_start|>system\n" + system + "<|im_end|>\n") if system else ""
        prefix += "<|im_start|>user\n<tools>" + tools_json + "</tools>"
        text = prefix + "\n" + case["query"] + "<|im_end|>\n<|im_start|>assistant\n"
        per[name] = {"text": text, "ids": [2] + sp.encode(text),
                     "tools_prefix": 1 + len(sp.encode(prefix))}
    results.append(per)
json.dump(results, open(out, "w", encoding="utf-8"), ensure_ascii=False)
)";

TEST(ChatTemplate, BothTemplatesMatchTheirOfficialRendering) {
  const Tokenizer tok = Needle2Tokenizer();
  const std::string weather =
      R"([{"name": "get_weather", "description": "Wetter für Zürich, 東京 und 😀",)"
      R"( "parameters": {"type": "object", "properties": {"city": {"type": "string",)"
      R"( "enum": ["Zürich", "東京", "São Paulo", "🏙️"]}}}, "x": "\u007f\u0001\t\"\\"}])";
  const std::vector<ChatCase> cases = {
      {weather, "Wie ist das Wetter in Zürich? 😀", std::nullopt},
      {weather, "東京の天気は?", std::string("  Du bist ein Assistent.\n")},
      {weather, "q", std::string("")},                         // empty: no system turn in either
      {weather, "q", std::string(" \n\t ")},                   // blank: a turn in v2.0.9 only
      {weather, "q", std::string("\xE3\x80\x80sys\xC2\xA0")},  // Unicode spaces: str.strip()
      {R"([{"name": "ascii_only", "parameters": {}}])", "plain", std::string("sys")},
  };
  nlohmann::json list = nlohmann::json::array();
  for (const ChatCase& c : cases) {
    nlohmann::json j = {{"tools", c.tools}, {"query", c.query}};
    if (c.system) j["system"] = *c.system;
    list.push_back(j);
  }
  TempDir dir;
  WriteText(dir / "cases.json", list.dump());
  WriteText(dir / "oracle.py", kTemplateOracle);
  CommandResult r =
      cact::testing::Run(Python() + " " + (dir / "oracle.py") + " " + Needle2TokenizerPath() + " " +
                         (dir / "cases.json") + " " + (dir / "out.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(dir / "out.json");
  const nlohmann::json want = nlohmann::json::parse(f);
  ASSERT_EQ(want.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const ChatCase& c = cases[i];
    std::optional<std::string_view> system;
    if (c.system) system = *c.system;
    for (ChatTemplate t : {ChatTemplate::kV2_0_12, ChatTemplate::kV2_0_9}) {
      SCOPED_TRACE("case " + std::to_string(i) + " " + std::string(ChatTemplateName(t)));
      const nlohmann::json& w = want[i].at(std::string(ChatTemplateName(t)));
      auto got = BuildChatPrompt(tok, c.tools, c.query, system, t);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->text, w.at("text").get<std::string>());
      EXPECT_EQ(got->ids, w.at("ids").get<std::vector<int32_t>>());
      EXPECT_EQ(got->tools_prefix, w.at("tools_prefix").get<uint32_t>());
      // The compact tools in either ensure_ascii form render the same (EncodeChatPrompt
      // escapes for v2.0.9).
      for (bool ascii : {false, true}) {
        auto compact =
            CompactToolsJson(c.tools, ascii ? ChatTemplate::kV2_0_9 : ChatTemplate::kV2_0_12);
        ASSERT_TRUE(compact.ok()) << compact.status();
        if (t == ChatTemplate::kV2_0_12 && ascii) continue;  // v2.0.12 takes the text as given
        auto enc = EncodeChatPrompt(tok, *compact, c.query, system, t);
        ASSERT_TRUE(enc.ok()) << enc.status();
        EXPECT_EQ(enc->ids, got->ids);
      }
    }
  }
}

// The tools prefix is what prefix reuse and the prompt cache key by its ids
// (engine/generate/prefix_reuse.h): the templates must not share one where they render
// different prompts, and may where they render the same ids (ASCII tools, no system).
TEST(ChatTemplate, PrefixIdsTellTheTemplatesApart) {
  const Tokenizer tok = Needle2Tokenizer();
  auto prefix = [&](std::string_view tools, std::optional<std::string_view> system,
                    ChatTemplate t) {
    auto p = BuildChatPrompt(tok, tools, "q", system, t);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::vector<int32_t>(p->ids.begin(), p->ids.begin() + p->tools_prefix);
  };
  const std::string unicode = R"([{"name": "Zürich"}])", ascii = R"([{"name": "Oslo"}])";
  EXPECT_NE(prefix(unicode, std::nullopt, ChatTemplate::kV2_0_12),
            prefix(unicode, std::nullopt, ChatTemplate::kV2_0_9));
  EXPECT_NE(prefix(ascii, " sys", ChatTemplate::kV2_0_12),
            prefix(ascii, " sys", ChatTemplate::kV2_0_9));
  EXPECT_EQ(prefix(ascii, std::nullopt, ChatTemplate::kV2_0_12),
            prefix(ascii, std::nullopt, ChatTemplate::kV2_0_9));
}

TEST(ChatTemplate, NamesParseAndUnknownOnesListTheAccepted) {
  EXPECT_EQ(ChatTemplateName(kDefaultChatTemplate), "v2.0.12");
  EXPECT_EQ(ChatTemplateNames(), "v2.0.12, v2.0.9");
  for (ChatTemplate t : {ChatTemplate::kV2_0_12, ChatTemplate::kV2_0_9}) {
    auto p = ParseChatTemplate(ChatTemplateName(t));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(*p, t);
  }
  for (const char* bad : {"", "v2.0.10", "V2.0.9", "2.0.9", "v2.0.9 "}) {
    auto p = ParseChatTemplate(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(),
              "unknown chat template \"" + std::string(bad) + "\" (accepted: v2.0.12, v2.0.9)");
  }
}

// json.dumps(ensure_ascii=True) of random strings over every plane (controls, DEL, BMP,
// surrogate pairs), against Python; PythonJsonEnsureAscii of the UTF-8 form gives the same.
TEST(ChatTemplate, EnsureAsciiIsPythons) {
  std::mt19937 rng(11);
  auto append_utf8 = [](uint32_t c, std::string* s) {
    if (c < 0x80) {
      *s += char(c);
    } else if (c < 0x800) {
      *s += char(0xC0 | (c >> 6));
      *s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      *s += char(0xE0 | (c >> 12));
      *s += char(0x80 | ((c >> 6) & 0x3F));
      *s += char(0x80 | (c & 0x3F));
    } else {
      *s += char(0xF0 | (c >> 18));
      *s += char(0x80 | ((c >> 12) & 0x3F));
      *s += char(0x80 | ((c >> 6) & 0x3F));
      *s += char(0x80 | (c & 0x3F));
    }
  };
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0, 0x7F},        {0x7F, 0x7F},        {0x80, 0x7FF},     {0x800, 0xD7FF},
      {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}, {0x1F600, 0x1F64F}};
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < 400; ++i) {
    std::string s;
    for (int k = 0; k < 12; ++k) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      append_utf8(lo + rng() % (hi - lo + 1), &s);
    }
    values.push_back(i % 2 ? nlohmann::ordered_json(s) : nlohmann::ordered_json{{s, i}});
  }
  TempDir dir;
  WriteText(dir / "v.json", values.dump());
  CommandResult r =
      cact::testing::Run(Python() +
                         " -c \"import json,sys; v=json.load(open(sys.argv[1], encoding='utf-8')); "
                         "print(json.dumps(v, separators=(',', ':')))\" " +
                         (dir / "v.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ascii = PythonJsonDumps(values, /*ensure_ascii=*/true);
  EXPECT_EQ(ascii + "\n", r.output);
  EXPECT_EQ(PythonJsonEnsureAscii(PythonJsonDumps(values)), ascii);
  EXPECT_EQ(PythonJsonEnsureAscii(ascii), ascii);                          // idempotent
  EXPECT_EQ(PythonJsonEnsureAscii("\"\xFF\xC3\""), "\"\\ufffd\\ufffd\"");  // not UTF-8
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
