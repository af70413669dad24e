// The tool-call grammar against the independent Python validator
// (tests/engine/tool_call_validator.py): catalogues parse and bad tools files are refused
// naming tool and keyword; the validator self-test's valid outputs are accepted in the
// grammar's compact form and its invalid outputs refused; seeded random walks through the
// grammar, closed by ShortestCompletion(), validate; the token mask equals brute force on the
// tiny fixture tokenizer; the constrained decoder always finishes within its token budget.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "engine/token_mask.h"
#include "engine/tokenizer.h"
#include "engine/tool_call_decoder.h"
#include "engine/tool_call_grammar.h"
#include "engine/tool_schema.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

using Json = nlohmann::ordered_json;

const std::string kEngineTests = std::string(CACT_SOURCE_DIR) + "/tests/engine";
constexpr std::string_view kImEnd = "<|im_end|>";

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Catalogue {
  std::string id;
  Json tools;
  std::unique_ptr<ToolCallGrammar> grammar;
};

// The six catalogues of data/tool_schemas.json, parsed once.
const std::vector<Catalogue>& Catalogues() {
  static const std::vector<Catalogue> catalogues = [] {
    std::vector<Catalogue> out;
    const Json all = Json::parse(ReadText(kEngineTests + "/data/tool_schemas.json"));
    for (const Json& c : all.at("catalogs")) {
      Catalogue cat{c.at("id").get<std::string>(), c.at("tools"), nullptr};
      auto parsed = ParseToolCatalog(cat.tools.dump(), cat.id);
      EXPECT_TRUE(parsed.ok()) << cat.id << ": " << parsed.status();
      if (parsed.ok()) cat.grammar = std::make_unique<ToolCallGrammar>(std::move(*parsed));
      out.push_back(std::move(cat));
    }
    return out;
  }();
  return catalogues;
}

bool Accepts(const ToolCallGrammar& g, std::string_view text) {
  GrammarState s(g);
  return s.Feed(text) && s.Done();
}

// ---------------------------------------------------------------------------------------
// Catalogues and refused tools files.

TEST(ToolCallGrammar, EveryCatalogueParses) {
  ASSERT_EQ(Catalogues().size(), 6u);
  for (const Catalogue& c : Catalogues()) {
    ASSERT_NE(c.grammar, nullptr) << c.id;
    EXPECT_EQ(c.grammar->catalog().tools.size(), c.tools.size()) << c.id;
  }
}

TEST(ToolCallGrammar, BadToolsFilesAreRefusedNamingToolAndKeyword) {
  const std::string dir = kEngineTests + "/data/bad_tools/";
  std::istringstream tsv(ReadText(dir + "expected.tsv"));
  std::string line;
  int rows = 0;
  while (std::getline(tsv, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream row(line);
    for (std::string col; std::getline(row, col, '\t');) cols.push_back(col);
    ASSERT_EQ(cols.size(), 3u) << line;
    ++rows;
    auto catalog = ParseToolCatalog(ReadText(dir + cols[0]), cols[0]);
    ASSERT_FALSE(catalog.ok()) << cols[0] << " was accepted";
    const absl::Status& st = catalog.status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << cols[0] << ": " << st;
    const std::string msg(st.message());
    EXPECT_NE(msg.find(cols[0]), std::string::npos) << "names the file: " << msg;
    if (cols[1] != "-") {
      EXPECT_NE(msg.find("\"" + cols[1] + "\""), std::string::npos)
          << cols[0] << ": the message should name tool " << cols[1] << ": " << msg;
    }
    EXPECT_NE(msg.find(cols[2]), std::string::npos)
        << cols[0] << ": the message should name " << cols[2] << ": " << msg;
  }
  EXPECT_GE(rows, 30);
}

// ---------------------------------------------------------------------------------------
// Grammar details: regressions and the shortest way out.

// Regression: exponents of three digits let 1e400 through, which no double holds (Python's
// json reads inf; the validator refuses it). Two digits keep every number below 1e118.
TEST(ToolCallGrammar, NumbersStayWithinADouble) {
  const ToolCallGrammar& g = *Catalogues()[1].grammar;  // eight_tools_all_types
  const std::string head =
      "<tool_call>[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":";
  const std::string tail = ",\"mode\":\"heat\"}}]</tool_call><|im_end|>";
  for (const char* ok :
       {"1e99", "-1.5E+99", "1e-99", "999999999999999999.999999999999999999e99", "0"})
    EXPECT_TRUE(Accepts(g, head + ok + tail)) << ok;
  for (const char* bad : {"1e400", "1e308", "1e-400", "1e100", "1.5E+100"})
    EXPECT_FALSE(Accepts(g, head + bad + tail)) << bad;
}

// Regression: the think text took any bytes, so a token mask let the model write invalid
// UTF-8 or the stop token's text ("<|im_end|>" as plain pieces) inside the think block;
// both make an answer the validator refuses (and the stop token would end it early).
TEST(ToolCallGrammar, ThinkTextIsUtf8WithoutTheStopToken) {
  const ToolCallGrammar& g = *Catalogues()[0].grammar;
  const std::string tail = "</think>\n<tool_call>[]</tool_call><|im_end|>";
  for (std::string ok : {"", "\n<im_end|> <|im_end <| im_end|>",
                         "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80", "<</think", "\x01\x7F"})
    EXPECT_TRUE(Accepts(g, "<think>" + ok + tail)) << absl::CEscape(ok);
  for (std::string bad : {"a<|im_end|>b", "<<|im_end|>", "\xFF", "\xC3", "\xC3(", "\xED\xA0\x80",
                          "\xC0\x80", "\xF4\x90\x80\x80"})
    EXPECT_FALSE(Accepts(g, "<think>" + bad + tail)) << absl::CEscape(bad);
  // A character left open: the exits finish it first.
  GrammarState s(g);
  ASSERT_TRUE(s.Feed("<think>\xF0\x9F\x98"));
  EXPECT_EQ(s.context(), GrammarState::Context::kStructure);
  EXPECT_EQ(s.ThinkExit(), "\x80</think>\n<tool_call>");
  EXPECT_EQ(s.ShortestCompletion(), "\x80" + tail);
  GrammarState t = s;
  EXPECT_TRUE(t.Feed(s.ThinkExit()));
  ASSERT_TRUE(s.Feed("\x80<|im_"));
  EXPECT_EQ(s.context(), GrammarState::Context::kStructure);
  EXPECT_EQ(s.ThinkExit(), "</think>\n<tool_call>");
  EXPECT_FALSE(GrammarState(s).Feed("end|>"));
  EXPECT_TRUE(GrammarState(s).Feed("end|"));
}

TEST(ToolCallGrammar, ShortestCompletionFromTheStart) {
  for (const Catalogue& c : Catalogues()) {
    GrammarState s(*c.grammar);
    EXPECT_FALSE(s.Done());
    const std::string done = s.ShortestCompletion();
    EXPECT_EQ(done, "<tool_call>[]</tool_call><|im_end|>") << c.id;
    GrammarState think(*c.grammar);
    ASSERT_TRUE(think.Feed("<think>ab</thi"));
    EXPECT_TRUE(think.InThink());
    EXPECT_EQ(think.ThinkExit(), "nk>\n<tool_call>");
    EXPECT_EQ(think.ShortestCompletion(), "nk>\n<tool_call>[]</tool_call><|im_end|>");
  }
}

}  // namespace
}  // namespace cact::testing
