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
#include "engine/toolcall/token_mask.h"
#include "engine/text/tokenizer.h"
#include "engine/toolcall/tool_call_decoder.h"
#include "engine/toolcall/tool_call_grammar.h"
#include "engine/toolcall/tool_schema.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

using Json = nlohmann::ordered_json;

const std::string kEngineTests = std::string(CACT_SOURCE_DIR) + "/tests/engine";
constexpr std::string_view kImEnd = "<|im_end|>";

std::string FromHex(const std::string& hex) { return absl::HexStringToBytes(hex); }

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    const uint8_t b1 = len > 1 ? uint8_t(s[i + 1]) : 0x80;
    if ((c == 0xE0 && b1 < 0xA0) || (c == 0xED && b1 > 0x9F) || (c == 0xF0 && b1 < 0x90) ||
        (c == 0xF4 && b1 > 0x8F))
      return false;
    for (size_t k = 1; k < len; ++k)
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
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

// A catalogue's verdict on a text: refused when the tools are refused.
bool CatalogAccepts(const Json& tools, std::string_view text) {
  auto catalog = ParseToolCatalog(tools.dump(), "tools");
  if (!catalog.ok()) return false;
  return Accepts(ToolCallGrammar(std::move(*catalog)), text);
}

// Runs the Python validator once over `lines` ({"tools", "text"} records); "" when it exits
// 0, else its output.
std::string RunValidator(const std::vector<Json>& lines, const std::string& name) {
  TempDir dir;
  {
    std::ofstream f(dir / name);
    for (const Json& l : lines) f << l.dump() << "\n";
  }
  CommandResult r = Run(Python() + " " + kEngineTests + "/tool_call_validator.py " + (dir / name));
  return r.exit_code == 0 ? "" : r.output;
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
// json reads inf; the validator refuses it). Two exponent digits and 15 mantissa digits keep
// every number a finite double that prints back as the same decimal.
TEST(ToolCallGrammar, NumbersStayWithinADouble) {
  const ToolCallGrammar& g = *Catalogues()[1].grammar;  // eight_tools_all_types
  const std::string head =
      "<tool_call>[{\"name\":\"set_thermostat\",\"arguments\":{\"temperature\":";
  const std::string tail = ",\"mode\":\"heat\"}}]</tool_call><|im_end|>";
  for (const char* ok :
       {"1e99", "-1.5E+99", "1e-99", "99999999999999.9e99", "123456789012345", "0"})
    EXPECT_TRUE(Accepts(g, head + ok + tail)) << ok;
  for (const char* bad : {"1e400", "1e308", "1e-400", "1e100", "1.5E+100", "1234567890123456",
                          "0.000000000000001", "123456789012345.6"})
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

// Known gap, not fixed: an untyped value's objects (free JSON) do not track their keys, so a
// duplicate key there is accepted while the validator refuses it (declared keys are tracked).
// Enable when free objects remember their keys.
TEST(ToolCallGrammar, DISABLED_FreeObjectsRefuseDuplicateKeys) {
  const ToolCallGrammar& g = *Catalogues()[1].grammar;  // log_event.payload is untyped
  for (const char* payload : {R"({"a":1,"a":2})", R"({"":1,"":2})", R"([{"k":null,"k":null}])"}) {
    const std::string text =
        std::string(R"(<tool_call>[{"name":"log_event","arguments":{"payload":)") + payload +
        R"(,"level":"info"}}]</tool_call><|im_end|>)";
    EXPECT_FALSE(Accepts(g, text)) << text;
  }
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

// ---------------------------------------------------------------------------------------
// The validator self-test's outputs (exported by tool_call_cases.py).

struct ValidatorCase {
  std::string what;
  Json tools;
  std::string text, with_stop, canonical;
  bool valid = false, with_stop_valid = false, has_canonical = false;
};

const std::vector<ValidatorCase>& ValidatorCases() {
  static const std::vector<ValidatorCase> cases = [] {
    std::vector<ValidatorCase> out;
    TempDir dir;
    CommandResult r =
        Run(Python() + " " + kEngineTests + "/tool_call_cases.py " + (dir / "cases.jsonl"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::istringstream in(ReadText(dir / "cases.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line);
      ValidatorCase c;
      c.what = j.at("what").get<std::string>();
      c.tools = j.at("tools");
      c.text = FromHex(j.at("text").get<std::string>());
      c.with_stop = FromHex(j.at("with_stop").get<std::string>());
      c.valid = j.at("valid").get<bool>();
      c.with_stop_valid = j.at("with_stop_valid").get<bool>();
      if (j.contains("canonical") && j["canonical"].is_string()) {
        c.has_canonical = true;
        c.canonical = FromHex(j["canonical"].get<std::string>());
      }
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

// Valid outputs whose compact form the grammar still refuses, by design: enum and const
// values are matched byte for byte against Python's json.dumps of the declared value, so a
// const object written with its keys in another order is refused.
const std::set<std::string> kCanonicalRefused = {"unions, const object in another key order"};
// Valid outputs that are compact JSON but not the grammar's form even with the stop token:
// an enum member written as another literal of the same number (1.50 for 1.5), the const
// object in another key order, a \u surrogate pair (\ud83d\ude00: the grammar refuses every
// surrogate escape; the character is written as UTF-8 instead).
const std::set<std::string> kWithStopRefused = {"number enum member by exact decimal value",
                                                "unions, const object in another key order",
                                                "\\u escapes incl. a surrogate pair"};

TEST(ToolCallGrammar, ValidOutputsAreAcceptedInCompactForm) {
  int valid = 0, compact = 0;
  for (const ValidatorCase& c : ValidatorCases()) {
    if (!c.valid) continue;
    ++valid;
    SCOPED_TRACE(c.what + "\n  text: " + c.text);
    // The grammar's form of the same calls: accepted.
    ASSERT_TRUE(c.has_canonical);
    EXPECT_EQ(CatalogAccepts(c.tools, c.canonical), !kCanonicalRefused.count(c.what))
        << "compact form: " << c.canonical;
    if (c.text == c.canonical) {
      ++compact;
      EXPECT_TRUE(CatalogAccepts(c.tools, c.text));
      continue;
    }
    // Without the stop token the answer is not finished: a valid prefix, never Done().
    if (!c.text.ends_with(kImEnd)) {
      EXPECT_FALSE(CatalogAccepts(c.tools, c.text));
    }
    // With it: accepted unless documented (\u escapes outside enums, \/, -0, 2.5e-3 and
    // other number spellings are all in the grammar).
    const bool has_surrogate_escape = c.with_stop.find("\\ud8") != std::string::npos ||
                                      c.with_stop.find("\\ud9") != std::string::npos ||
                                      c.with_stop.find("\\uda") != std::string::npos ||
                                      c.with_stop.find("\\udb") != std::string::npos;
    const bool ascii_escaped = c.what.ends_with("\\u-escaped, no stop token");
    if (ascii_escaped) continue;  // checked below: depends on the tool's non-ASCII keys/enums
    EXPECT_EQ(CatalogAccepts(c.tools, c.with_stop),
              !kWithStopRefused.count(c.what) && !has_surrogate_escape)
        << "with the stop token: " << c.with_stop;
  }
  EXPECT_GE(valid, 80);
  EXPECT_GE(compact, 20);
}

// The ASCII-escaped instances (json.dumps ensure_ascii=True) with the stop token: the grammar
// accepts \uXXXX escapes inside free strings, but a declared key, enum or const value must be
// written as declared (raw UTF-8) and a surrogate pair is refused; so an escaped instance is
// accepted exactly when the escapes touch none of those: when it has no \ud8..\udf escape and
// its canonical form, ASCII-escaped, escapes nothing inside a key, enum or const.
TEST(ToolCallGrammar, AsciiEscapedOutputsFollowTheEnumAndSurrogateRules) {
  int accepted = 0, refused = 0;
  for (const ValidatorCase& c : ValidatorCases()) {
    if (!c.valid || !c.what.ends_with("\\u-escaped, no stop token")) continue;
    SCOPED_TRACE(c.what + "\n  text: " + c.with_stop);
    const bool ok = CatalogAccepts(c.tools, c.with_stop);
    (ok ? accepted : refused)++;
    if (c.with_stop.find("\\u") == std::string::npos) {
      EXPECT_TRUE(ok) << "nothing escaped";
    }
    if (c.with_stop.find("\\ud83d") != std::string::npos) {
      EXPECT_FALSE(ok) << "surrogates";
    }
  }
  EXPECT_GT(accepted, 10);
  EXPECT_GT(refused, 0);
}

TEST(ToolCallGrammar, InvalidOutputsAreRefused) {
  int invalid = 0;
  for (const ValidatorCase& c : ValidatorCases()) {
    if (c.valid) continue;
    ++invalid;
    SCOPED_TRACE(c.what + "\n  text: " + c.text);
    EXPECT_FALSE(CatalogAccepts(c.tools, c.text));
    // Adding the stop token must not make it acceptable either (when the validator still
    // refuses it).
    if (!c.with_stop_valid) {
      EXPECT_FALSE(CatalogAccepts(c.tools, c.with_stop)) << c.with_stop;
    }
  }
  EXPECT_GE(invalid, 70);
}

// ---------------------------------------------------------------------------------------
// Random walks.

std::vector<uint8_t> NextBytes(const GrammarState& s) {
  std::vector<uint8_t> out;
  for (int c = 0; c < 256; ++c) {
    GrammarState t = s;
    if (t.Feed(uint8_t(c))) out.push_back(uint8_t(c));
  }
  return out;
}

// A random byte among those `s` accepts: half of the time one of the bytes that move the
// structure on (quotes, brackets, separators, digits, markup), when any is accepted, so walks
// get past string bodies and think text.
uint8_t PickByte(const std::vector<uint8_t>& next, std::mt19937_64& rng) {
  static const std::string kStructural = "\"{}[],:-.0123456789eEtfn<>/\\u\n";
  if (std::uniform_int_distribution<int>(0, 1)(rng)) {
    std::vector<uint8_t> structural;
    for (uint8_t c : next)
      if (kStructural.find(char(c)) != std::string::npos) structural.push_back(c);
    if (!structural.empty())
      return structural[std::uniform_int_distribution<size_t>(0, structural.size() - 1)(rng)];
  }
  return next[std::uniform_int_distribution<size_t>(0, next.size() - 1)(rng)];
}

struct Walk {
  std::string prefix;
  GrammarState state;
};

Walk RandomWalk(const ToolCallGrammar& g, std::mt19937_64& rng, size_t max_len = 300) {
  Walk w{"", GrammarState(g)};
  const size_t len = std::uniform_int_distribution<size_t>(0, max_len)(rng);
  while (w.prefix.size() < len && !w.state.Done()) {
    const std::vector<uint8_t> next = NextBytes(w.state);
    if (next.empty()) {
      ADD_FAILURE() << "dead end after " << absl::CEscape(w.prefix);
      break;
    }
    const uint8_t c = PickByte(next, rng);
    EXPECT_TRUE(w.state.Feed(c));
    w.prefix += char(c);
  }
  return w;
}

// An upper bound on the bytes that finish any partial value of `node` (-1: any value),
// computed from the schema alone; `depth_room` bounds what free (untyped) JSON can have left
// open (one closing byte per byte written, plus a key's colon and a value).
uint64_t CompletionBound(const ToolCatalog& cat, int node, uint64_t depth_room) {
  if (node < 0) return 2 * depth_room + 8;
  const SchemaNode& n = cat.nodes[node];
  if (!n.members.empty()) {
    uint64_t b = 0;
    for (int m : n.members) b = std::max(b, CompletionBound(cat, m, depth_room));
    return b;
  }
  switch (n.kind) {
    case SchemaNode::kAny:
      return 2 * depth_room + 8;
    case SchemaNode::kInteger:
    case SchemaNode::kNumber:
      return 3;  // "-" -> "0"; "1e" -> "0"; "." -> "0"
    case SchemaNode::kBoolean:
      return 5;  // false
    case SchemaNode::kNull:
      return 4;
    case SchemaNode::kString:
      return 2 + 4 + n.min_length;  // quotes, a \uXXXX, the minimum
    case SchemaNode::kEnum: {
      uint64_t b = 0;
      for (const std::string& v : n.values) b = std::max<uint64_t>(b, v.size());
      return b;
    }
    case SchemaNode::kArray: {
      const uint64_t item = CompletionBound(cat, n.items, depth_room);
      return 2 + item + uint64_t(n.min_items) * (item + 1);
    }
    case SchemaNode::kObject: {
      uint64_t b = 2, child = 0, key = 0;
      for (const SchemaNode::Property& p : n.properties) {
        const uint64_t v = CompletionBound(cat, p.node, depth_room);
        child = std::max(child, v);
        key = std::max<uint64_t>(key, p.name.size() * 6 + 3);
        if (p.required) b += p.name.size() * 6 + 4 + v;
      }
      return b + child + key;
    }
  }
  return 0;
}

uint64_t ShortestCompletionBound(const ToolCatalog& cat, uint64_t written) {
  uint64_t call = 0;
  for (const ToolSpec& t : cat.tools)
    call = std::max(call, 40 + t.name.size() * 6 + CompletionBound(cat, t.arguments, written));
  // "</think>\n<tool_call>" + "[" + one call + "]" + "</tool_call><|im_end|>"
  return 20 + 1 + call + 1 + 22;
}

// The prefix as the validator reads it: the tokenizer's dummy space is not part of the text.
std::string ValidatorText(std::string_view bytes) {
  if (bytes.starts_with(' ')) bytes.remove_prefix(1);
  return std::string(bytes);
}

TEST(ToolCallGrammar, RandomWalksCompleteToValidAnswers) {
  constexpr int kWalks = 2000;
  std::vector<Json> lines;
  for (const Catalogue& c : Catalogues()) {
    ASSERT_NE(c.grammar, nullptr);
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull ^ std::hash<std::string>()(c.id));
    uint64_t max_completion = 0;
    for (int i = 0; i < kWalks; ++i) {
      Walk w = RandomWalk(*c.grammar, rng);
      const std::string completion = w.state.ShortestCompletion();
      SCOPED_TRACE(c.id + " walk " + std::to_string(i) + ": " + absl::CEscape(w.prefix) + " + " +
                   absl::CEscape(completion));
      EXPECT_EQ(completion.empty(), w.state.Done());
      EXPECT_LE(completion.size(), ShortestCompletionBound(c.grammar->catalog(), w.prefix.size()));
      max_completion = std::max<uint64_t>(max_completion, completion.size());
      GrammarState s = w.state;
      ASSERT_TRUE(s.Feed(completion));
      ASSERT_TRUE(s.Done());
      const std::string text = ValidatorText(w.prefix + completion);
      ASSERT_TRUE(ValidUtf8(text)) << "the answer is not UTF-8";
      lines.push_back(Json{{"tools", c.tools}, {"text", text}});
    }
    std::cout << c.id << ": longest shortest completion " << max_completion << " bytes\n";
  }
  const std::string failures = RunValidator(lines, "walks.jsonl");
  EXPECT_EQ(failures, "");
}

// ---------------------------------------------------------------------------------------
// Token masks on the tiny fixture tokenizer.

const VocabularyTrie& TinyTrie() {
  static const VocabularyTrie* trie = [] {
    const Model& m = FixtureModel("tiny");
    auto t = Tokenizer::FromBytes(m.file().tokenizer_blob(), m.path());
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      std::abort();
    }
    static Tokenizer tokenizer = std::move(*t);
    return new VocabularyTrie(tokenizer);
  }();
  return *trie;
}

// States along seeded random walks, up to `per_context` of each context, in walk order.
std::vector<Walk> SampleStates(const ToolCallGrammar& g, uint64_t seed, size_t per_context) {
  std::mt19937_64 rng(seed);
  std::map<GrammarState::Context, std::vector<Walk>> by_context;
  for (int i = 0; i < 200; ++i) {
    Walk w{"", GrammarState(g)};
    const size_t len = std::uniform_int_distribution<size_t>(1, 200)(rng);
    while (w.prefix.size() < len && !w.state.Done()) {
      const uint8_t c = PickByte(NextBytes(w.state), rng);
      w.state.Feed(c);
      w.prefix += char(c);
      // Every fifth state, so one walk does not fill a context alone.
      auto& bucket = by_context[w.state.context()];
      if (std::uniform_int_distribution<int>(0, 4)(rng) == 0 && bucket.size() < per_context)
        bucket.push_back(w);
    }
  }
  std::vector<Walk> out;
  for (auto& [context, walks] : by_context) out.insert(out.end(), walks.begin(), walks.end());
  return out;
}

TEST(ToolCallGrammar, TokenMaskEqualsBruteForce) {
  const VocabularyTrie& trie = TinyTrie();
  TokenMasker masker(trie);
  std::map<GrammarState::Context, int> contexts;
  std::vector<uint8_t> mask;
  for (const Catalogue& c : Catalogues()) {
    for (const Walk& w : SampleStates(*c.grammar, 42 ^ std::hash<std::string>()(c.id), 25)) {
      SCOPED_TRACE(c.id + ": " + absl::CEscape(w.prefix));
      ++contexts[w.state.context()];
      masker.Allowed(w.state, &mask);
      ASSERT_EQ(mask.size(), size_t(trie.vocab_size()));
      for (int32_t t = 0; t < trie.vocab_size(); ++t) {
        GrammarState s = w.state;
        const bool want = !trie.bytes(t).empty() && s.Feed(trie.bytes(t));
        ASSERT_EQ(bool(mask[t]), want)
            << "token " << t << " '" << absl::CEscape(trie.bytes(t)) << "'";
      }
      // The shortest completion can be written with tokens, and they finish the answer.
      const std::string completion = w.state.ShortestCompletion();
      const std::vector<int32_t> tokens = trie.GreedyTokens(completion);
      ASSERT_EQ(tokens.empty(), completion.empty());
      GrammarState s = w.state;
      std::string written;
      for (int32_t t : tokens) {
        written += trie.bytes(t);
        ASSERT_TRUE(s.Feed(trie.bytes(t)));
      }
      EXPECT_EQ(written, completion);
      EXPECT_TRUE(s.Done());
    }
  }
  // Every context in every catalogue, except string bodies in relaxed_numeric_bounds: its
  // parameters are all numbers (tool names and keys are literals, not string bodies).
  EXPECT_EQ(contexts[GrammarState::Context::kStructure], 25 * 6);
  EXPECT_GE(contexts[GrammarState::Context::kStringBody], 25 * 5);
  EXPECT_EQ(contexts[GrammarState::Context::kThinkText], 25 * 6);
}

// ---------------------------------------------------------------------------------------
// The constrained decoder.

TEST(ToolCallGrammar, DecoderFinishesWithinEveryBudget) {
  const VocabularyTrie& trie = TinyTrie();
  std::vector<Json> lines;
  std::vector<uint32_t> budgets = {5, 6, 7, 8, 9, 10, 11, 12, 32, 64};
  int finished = 0;
  for (const Catalogue& c : Catalogues()) {
    const size_t shortest = trie.GreedyTokens(GrammarState(*c.grammar).ShortestCompletion()).size();
    for (uint32_t budget : budgets) {
      for (uint64_t seed = 0; seed < 6; ++seed) {
        SCOPED_TRACE(c.id + " max_tokens " + std::to_string(budget) + " seed " +
                     std::to_string(seed));
        ToolCallDecodeOptions options;
        options.max_tokens = budget;
        options.think_max = uint32_t(seed * 3);
        options.sampling.temperature = 1.0f;
        options.sampling.seed = seed;
        auto decoder = ToolCallDecoder::Create(*c.grammar, trie, options);
        if (budget < shortest) {
          ASSERT_FALSE(decoder.ok());
          EXPECT_EQ(decoder.status().code(), absl::StatusCode::kInvalidArgument);
          EXPECT_NE(decoder.status().message().find("too small"), std::string_view::npos)
              << decoder.status();
          continue;
        }
        ASSERT_TRUE(decoder.ok()) << decoder.status();
        std::mt19937_64 rng(seed * 1000003 + budget);
        std::normal_distribution<float> normal(0.0f, 3.0f);
        std::vector<float> logits(size_t(trie.vocab_size()));
        uint32_t tokens = 0;
        for (;;) {
          for (float& l : logits) l = normal(rng);
          const int32_t t = decoder->Next(logits);
          if (t < 0) break;
          ASSERT_LT(t, trie.vocab_size());
          ++tokens;
          ASSERT_LE(tokens, budget);
        }
        ASSERT_TRUE(decoder->done()) << absl::CEscape(decoder->bytes());
        ASSERT_TRUE(ValidUtf8(decoder->bytes())) << absl::CEscape(decoder->bytes());
        ++finished;
        lines.push_back(Json{{"tools", c.tools}, {"text", ValidatorText(decoder->bytes())}});
      }
    }
  }
  EXPECT_GT(finished, 200);
  EXPECT_EQ(RunValidator(lines, "decoded.jsonl"), "");
}

TEST(ToolCallGrammar, DecoderRefusesABudgetBelowTheShortestAnswer) {
  const VocabularyTrie& trie = TinyTrie();
  const ToolCallGrammar& g = *Catalogues()[0].grammar;
  const size_t shortest = trie.GreedyTokens(GrammarState(g).ShortestCompletion()).size();
  ASSERT_GT(shortest, 1u);
  ToolCallDecodeOptions options;
  options.max_tokens = uint32_t(shortest - 1);
  auto d = ToolCallDecoder::Create(g, trie, options);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find(std::to_string(shortest - 1) + " is too small"),
            std::string_view::npos)
      << d.status();
  EXPECT_NE(d.status().message().find(std::to_string(shortest) + " tokens"), std::string_view::npos)
      << d.status();
  options.max_tokens = uint32_t(shortest);
  EXPECT_TRUE(ToolCallDecoder::Create(g, trie, options).ok());
}

}  // namespace
}  // namespace cact::testing
