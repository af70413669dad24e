// train/finetune_data against an independent Python oracle of the official reader,
// renderer and encoder (tests/train/render_oracle.py, libsentencepiece + json), and the
// reader's errors, each naming file:line and the field.
#include "train/finetune_data.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "engine/text/python_json.h"
#include "quant/synthetic.h"
#include "support/test_support.h"
#include "train/finetune_example.h"

namespace cact::train {
namespace {

const std::string kSource = CACT_SOURCE_DIR;
const std::string kExamples = kSource + "/tests/train/finetune_examples.jsonl";
const std::string kModel = kSource + "/quant/data/small_tokenizer.model";

Tokenizer PresetTokenizer() {
  auto blob = SyntheticTokenizer(*FindSyntheticPreset("small"));
  EXPECT_TRUE(blob.ok()) << blob.status();
  auto tok = Tokenizer::FromBlob(*std::move(blob));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

nlohmann::json RunPython(const std::string& args) {
  const auto r = testing::Run(testing::Python() + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

// The v2.0.9 render_example (ensure_ascii JSON, nothing stripped, the think block always),
// plugged into render_oracle.py's reader and encoder. A null reasoning, on which v2.0.9
// raises, renders as an absent one: cact's documented choice (train/finetune_data.h).
constexpr const char* kOracleV2_0_9 = R"(import json, sys
sys.path.insert(0, sys.argv.pop(1))
import render_oracle as o

def dumps(value):
    return json.dumps(value, separators=(",", ":"))

def render(example):
    tools = example.get("tools", [])
    answers = example.get("answers", example.get("function_calls", []))
    reasoning = example.get("reasoning", "")
    reasoning = "" if reasoning is None else reasoning
    system = example.get("system", "")
    prompt = (o.IM_START + "system\n" + system + o.IM_END + "\n") if system else ""
    prompt += (o.IM_START + "user\n" + o.TOOLS_START
               + (tools if isinstance(tools, str) else dumps(tools)) + o.TOOLS_END + "\n"
               + example["query"] + o.IM_END + "\n" + o.IM_START + "assistant\n")
    target = (o.THINK_START + reasoning + o.THINK_END + "\n" + o.TOOL_CALL_START
              + (answers if isinstance(answers, str) else dumps(answers))
              + o.TOOL_CALL_END + o.IM_END)
    return prompt, target

o.render = render
o.main()
)";

// Lines that tell the two templates apart: non-ASCII (a BMP character, one beyond it, DEL)
// in printed and in verbatim JSON, reasoning and system with whitespace around, empty ones.
constexpr const char* kTemplateLines =
    R"({"query": "Zürich → 東京 😀", "tools": "[{\"name\": \"Zürich\", \"d\": \"😀\"}]", "answers": [{"name": "f", "arguments": {"city": "Zürich", "e": "😀\u007f\u0001", "t": "東京"}}], "reasoning": "\n  think 東京  \n", "system": ""}
{"query": "q", "tools": [{"name": "東京", "description": "😀 Zürich \u007f"}], "answers": "[{\"name\": \"東京\"}]", "system": "  sys \u3000"}
{"query": "no reasoning key", "tools": [], "answers": []}
{"query": "empty reasoning", "reasoning": "", "system": "   ", "answers": [{"name": "é", "arguments": {}}]}
{"messages": [{"role": "system", "content": " Sé breve. "}, {"role": "user", "content": "Tiempo en Málaga"}, {"role": "assistant", "tool_calls": [{"function": {"name": "w", "arguments": "{\"city\": \"Málaga\"}"}}]}], "tools": [{"type": "function", "function": {"name": "w", "description": "Météo 🌧"}}]}
)";

// Every example of `data` rendered and encoded with `t` against the oracle's rendering.
void ExpectOracleRendering(const std::string& data, ChatTemplate t) {
  SCOPED_TRACE(std::string(ChatTemplateName(t)) + " " + data);
  const std::vector<size_t> max_lens = {64, 300, 2048};
  const std::string lens = " " + kModel + " 4096 64 300 2048";
  testing::TempDir dir;
  std::string oracle = kSource + "/tests/train/render_oracle.py " + data + lens;
  if (t == ChatTemplate::kV2_0_9) {
    std::ofstream(dir / "oracle_v2_0_9.py") << kOracleV2_0_9;
    oracle = (dir / "oracle_v2_0_9.py") + " " + kSource + "/tests/train " + data + lens;
  }
  const nlohmann::json want = RunPython(oracle);
  auto set = ReadFinetuneJsonl(data);
  ASSERT_TRUE(set.ok()) << set.status();
  const Tokenizer tok = PresetTokenizer();
  EXPECT_EQ(set->skipped, want["skipped"].get<size_t>());
  ASSERT_EQ(set->examples.size(), want["examples"].size());
  EXPECT_EQ(FitMaxLen(tok, set->examples, 4096, t), want["fit"].get<size_t>());
  size_t truncated = 0;
  for (size_t i = 0; i < set->examples.size(); ++i) {
    const FinetuneExample& ex = set->examples[i];
    const nlohmann::json& w = want["examples"][i];
    SCOPED_TRACE("line " + std::to_string(ex.line));
    EXPECT_EQ(ex.line, w["line"].get<size_t>());
    const RenderedExample r = RenderExample(ex, t);
    EXPECT_EQ(r.prompt, w["prompt"].get<std::string>());
    EXPECT_EQ(r.target, w["target"].get<std::string>());
    for (size_t m : max_lens) {
      const EncodedExample e = EncodeExample(tok, ex, m, t);
      const nlohmann::json& we = w["encoded"][std::to_string(m)];
      EXPECT_EQ(e.ids, we["ids"].get<std::vector<int32_t>>()) << "max_len " << m;
      EXPECT_EQ(e.loss_mask, we["mask"].get<std::vector<float>>()) << "max_len " << m;
      truncated += EncodedLength(tok, ex, t) > m;
    }
  }
  EXPECT_GT(truncated, 0u);  // the file exercises the cut
}

TEST(FinetuneData, MatchesTheOfficialRenderAndEncode) {
  ExpectOracleRendering(kExamples, ChatTemplate::kV2_0_12);
}

TEST(FinetuneData, MatchesTheV2_0_9RenderAndEncode) {
  ExpectOracleRendering(kExamples, ChatTemplate::kV2_0_9);
}

TEST(FinetuneData, BothTemplatesOnNonAsciiAndWhitespace) {
  testing::TempDir dir;
  std::ofstream(dir / "t.jsonl") << kTemplateLines;
  for (ChatTemplate t : {ChatTemplate::kV2_0_12, ChatTemplate::kV2_0_9})
    ExpectOracleRendering(dir / "t.jsonl", t);
}

// One example spelled out, so a reader sees the difference without an oracle.
TEST(FinetuneData, TemplatesDifferAsDocumented) {
  auto set = ParseFinetuneJsonl(
      R"({"query": "Wetter in Zürich", "system": " sys ", "reasoning": "  r  ",)"
      R"( "tools": [{"name": "w😀"}], "answers": [{"name": "w😀", "arguments": {"c": "Zürich"}}]})"
      "\n"
      R"({"query": "q", "tools": "[\"Zürich\"]"})",
      "x.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 2u);
  const RenderedExample a = RenderExample(set->examples[0], ChatTemplate::kV2_0_12);
  EXPECT_EQ(a.prompt,
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\n<tools>[{\"name\":\"w😀\"}]"
            "</tools>\nWetter in Zürich<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(a.target,
            "<think>\nr\n</think>\n<tool_call>[{\"name\":\"w😀\",\"arguments\":{\"c\":"
            "\"Zürich\"}}]</tool_call><|im_end|>");
  const RenderedExample b = RenderExample(set->examples[0], ChatTemplate::kV2_0_9);
  EXPECT_EQ(b.prompt,
            "<|im_start|>system\n sys <|im_end|>\n<|im_start|>user\n<tools>"
            "[{\"name\":\"w\\ud83d\\ude00\"}]</tools>\nWetter in Zürich<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(b.target,
            "<think>  r  </think>\n<tool_call>[{\"name\":\"w\\ud83d\\ude00\",\"arguments\":"
            "{\"c\":\"Z\\u00fcrich\"}}]</tool_call><|im_end|>");
  // A string value is the line's own text under both: never re-escaped.
  for (ChatTemplate t : {ChatTemplate::kV2_0_12, ChatTemplate::kV2_0_9}) {
    const RenderedExample v = RenderExample(set->examples[1], t);
    EXPECT_NE(v.prompt.find("<tools>[\"Zürich\"]</tools>"), std::string::npos) << v.prompt;
  }
  EXPECT_EQ(RenderExample(set->examples[1], ChatTemplate::kV2_0_12).target,
            "<tool_call>[]</tool_call><|im_end|>");
  EXPECT_EQ(RenderExample(set->examples[1], ChatTemplate::kV2_0_9).target,
            "<think></think>\n<tool_call>[]</tool_call><|im_end|>");
}

TEST(FinetuneData, SkipsWhatTheOfficialReaderSkips) {
  auto set = ReadFinetuneJsonl(kExamples);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->skipped_lines, (std::vector<size_t>{12, 13}));
  EXPECT_EQ(set->skipped, 2u);
}

TEST(FinetuneData, FitMaxLenBuckets) {
  const Tokenizer tok = PresetTokenizer();
  auto set = ParseFinetuneJsonl("{\"query\": \"hi\"}\n", "x.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(FitMaxLen(tok, set->examples, 4096), 128u);  // short: the smallest bucket
  EXPECT_EQ(FitMaxLen(tok, set->examples, 100), 100u);   // the cap wins
  EXPECT_EQ(FitMaxLen(tok, {}, 4096), 128u);
}

// Python's repr of random doubles of every magnitude, as json.dumps prints them.
TEST(FinetuneData, FloatsPrintAsPython) {
  std::mt19937_64 rng(7);
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < 3000; ++i) {
    double v;
    const uint64_t bits = rng();
    std::memcpy(&v, &bits, 8);
    if (std::isfinite(v)) values.push_back(v);
    values.push_back(double(int64_t(rng() % 2000001) - 1000000) *
                     std::pow(10.0, int(rng() % 40) - 20));
  }
  for (double v : {1.0, 1e15, 1e16, 9999999999999998.0, 1e-4, 1e-5, 0.0, -0.0, 5e-324, 1e22})
    values.push_back(v);
  testing::TempDir dir;
  std::ofstream(dir / "v.json") << values.dump(-1) << "\n";
  const auto r = testing::Run(testing::Python() +
                              " -c \"import json,sys; v=json.load(open(sys.argv[1])); "
                              "print(json.dumps(v, separators=(',', ':'), ensure_ascii=False))\" " +
                              (dir / "v.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(PythonJsonDumps(values) + "\n", r.output);
}

// Every code point up to U+3000 that Python's str.strip() removes, and none other.
TEST(FinetuneData, StripIsPythonsStrip) {
  const auto r = testing::Run(testing::Python() +
                              " -c \"print(' '.join(str(c) for c in range(1, 0x3001) if "
                              "chr(c).isspace()))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string ours;
  for (uint32_t c = 1; c <= 0x3000; ++c) {
    if (c >= 0xD800 && c < 0xE000) continue;
    std::string s;
    if (c < 0x80) {
      s = char(c);
    } else if (c < 0x800) {
      s = {char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
    } else {
      s = {char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
    }
    const std::string before = std::string("a").append(s), after = std::string(s).append("a");
    if (PyStrip(before).size() == 1 && PyStrip(after).size() == 1) {
      if (!ours.empty()) ours += ' ';
      ours += std::to_string(c);
    }
  }
  EXPECT_EQ(ours + "\n", r.output);
  // Malformed or overlong UTF-8 is not whitespace.
  EXPECT_EQ(PyStrip("\xC2\xA0x\xE3\x80\x80"), "x");
  EXPECT_EQ(PyStrip("\xC0\xA0x\xC2\x20"), "\xC0\xA0x\xC2");
  EXPECT_EQ(PyStrip("\xA0x\x80"), "\xA0x\x80");
}

struct BadLine {
  std::string line;
  std::string error;
};

TEST(FinetuneData, ErrorsNameTheLineAndTheField) {
  const std::string ok = "{\"query\": \"fine\"}\n";
  const std::vector<BadLine> cases = {
      {R"({"query": 5})", R"(data.jsonl:2: "query" must be a string)"},
      {R"({"query": "q", "answers": {"name": "x"}})",
       R"(data.jsonl:2: "answers" must be an array or a string)"},
      {R"({"query": "q", "function_calls": 3})",
       R"(data.jsonl:2: "function_calls" must be an array or a string)"},
      {R"({"query": "q", "tools": null})", R"(data.jsonl:2: "tools" must be an array or a string)"},
      {R"({"query": "q", "reasoning": 7})",
       R"(data.jsonl:2: "reasoning" must be a string or null)"},
      {R"({"query": "q", "system": ["x"]})", R"(data.jsonl:2: "system" must be a string or null)"},
      {R"({"query": "q")", "data.jsonl:2: malformed JSON"},
      {R"({"query": "q", "answers": [NaN]})", "data.jsonl:2: malformed JSON"},
      {"{\"query\": \"\xff\"}", "data.jsonl:2: malformed JSON"},
      {"[1, 2]", "data.jsonl:2: a line must be a JSON object, found array"},
      {R"({"query": "q", "answers": [1e999]})", "number overflow parsing '1e999'"},
      {R"({"query": "q", "answers": [123456789012345678901234567890]})",
       "outside the 64-bit range"},
      {R"({"query": "q", "answers": )" + std::string(600, '[') + std::string(600, ']') + "}",
       "data.jsonl:2: malformed JSON: nesting deeper than 500"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})",
       R"(data.jsonl:2: "messages[assistant].tool_calls[0].function.arguments" is not valid JSON)"},
      {R"({"messages": [{"role": "user"}, {"role": "assistant", "tool_calls": ["f"]}]})",
       R"(data.jsonl:2: "messages[assistant].tool_calls[0]" must be an object)"},
      {R"({"messages": [{"role": "user"}, {"role": "assistant", "tool_calls": {"a": 1}}]})",
       R"(data.jsonl:2: "messages[assistant].tool_calls" must be an array or null)"},
      {R"({"messages": ["x"]})", R"(data.jsonl:2: "messages[0]" must be an object)"},
      {R"({"messages": [{"role": "user", "content": ["part"]}, {"role": "assistant"}]})",
       R"(data.jsonl:2: "messages[user].content" must be a string or null)"},
      {R"({"messages": [{"role": "system", "content": 3}, {"role": "user"}, {"role": "assistant"}]})",
       R"(data.jsonl:2: "messages[system].content" must be a string or null)"},
      {R"({"messages": [{"role": "user"}, {"role": "assistant"}], "tools": "x"})",
       R"(data.jsonl:2: "tools" must be an array or null)"},
  };
  for (const BadLine& c : cases) {
    auto set = ParseFinetuneJsonl(ok + c.line + "\n" + ok, "data.jsonl");
    ASSERT_FALSE(set.ok()) << c.line;
    EXPECT_NE(std::string(set.status().message()).find(c.error), std::string::npos)
        << set.status() << "\nwanted: " << c.error;
  }
}

TEST(FinetuneData, FileLevelErrors) {
  auto bom = ParseFinetuneJsonl("\xEF\xBB\xBF{\"query\": \"q\"}\n", "data.jsonl");
  ASSERT_FALSE(bom.ok());
  EXPECT_NE(
      std::string(bom.status().message()).find("data.jsonl:1: starts with a UTF-8 byte-order mark"),
      std::string::npos);
  const std::string long_line = "{\"query\": \"" + std::string(kMaxFinetuneLine, 'a') + "\"}";
  auto too_long = ParseFinetuneJsonl("\n\n" + long_line + "\n", "data.jsonl");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(std::string(too_long.status().message()).find("data.jsonl:3: the line is"),
            std::string::npos)
      << too_long.status();
  auto missing = ReadFinetuneJsonl("/nonexistent/data.jsonl");
  EXPECT_FALSE(missing.ok());
}

TEST(FinetuneData, LineEndingsAndBlankLines) {
  auto set = ParseFinetuneJsonl(
      "\r\n{\"query\": \"a\"}\r{\"query\": \"b\"}\r\n \t\n{\"query\": \"c\"}", "x.jsonl");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->examples.size(), 3u);
  EXPECT_EQ(set->examples[0].line, 2u);
  EXPECT_EQ(set->examples[1].line, 3u);
  EXPECT_EQ(set->examples[2].line, 5u);
  EXPECT_EQ(set->examples[2].tools_json, "[]");
  EXPECT_EQ(set->examples[2].answers_json, "[]");
}

}  // namespace
}  // namespace cact::train
