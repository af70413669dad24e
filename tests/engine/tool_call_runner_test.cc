// Tool calls end to end (engine/toolcall/tool_call_runner.h) on random-weight models: every answer
// decoded under the grammar is a complete, schema-valid call list, checked by an
// independent validator (tests/engine/tool_call_validator.py: Python json + jsonschema);
// the prompt is the official rendering; retrieval and confidence report what they did.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/text/chat_template.h"
#include "engine/text/python_json.h"
#include "engine/toolcall/tool_call_runner.h"
#include "engine/toolcall/tool_retrieval.h"
#include "engine_test_util.h"
#include "synthetic_needle2.h"

namespace cact::testing {
namespace {

using Json = nlohmann::ordered_json;

std::string Data(const std::string& name) {
  return std::string(CACT_SOURCE_DIR) + "/tests/engine/data/" + name;
}

Json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return Json::parse(f);
}

const Json& Catalogs() {
  static const Json catalogs = ReadJson(Data("tool_schemas.json")).at("catalogs");
  return catalogs;
}

ToolCallRequest Request(const std::string& model, const Json& tools, const std::string& query) {
  ToolCallRequest req;
  req.run.model_path = model;
  req.run.max_new_tokens = 96;
  req.tools_file = "tools.json";
  req.tools_json = tools.dump();
  req.query = query;
  req.think_max = 16;
  return req;
}

// Runs the validator over JSONL records {"tools", "text", "tool_calls"}; returns its
// per-record verdicts (true = valid) and, through `report`, what it printed.
std::vector<bool> ValidatorVerdicts(const std::vector<Json>& records, std::string* report) {
  TempDir dir;
  {
    std::ofstream f(dir / "outputs.jsonl");
    for (const Json& r : records) f << r.dump() << "\n";
  }
  const std::string script =
      "import json, sys\n"
      "sys.path.insert(0, '" +
      std::string(CACT_SOURCE_DIR) +
      "/tests/engine')\n"
      "import tool_call_validator as v\n"
      "for line in open(sys.argv[1], encoding='utf-8'):\n"
      "    r = json.loads(line)\n"
      "    try:\n"
      "        v.validate_record(r)\n"
      "        print('ok')\n"
      "    except ValueError as e:\n"
      "        print('bad', str(e).replace('\\n', ' '))\n";
  {
    std::ofstream f(dir / "verdicts.py");
    f << script;
  }
  CommandResult r =
      cact::testing::Run(Python() + " " + (dir / "verdicts.py") + " " + (dir / "outputs.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  *report = r.output;
  std::vector<bool> verdicts;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("ok") || line.starts_with("bad")) verdicts.push_back(line[0] == 'o');
  return verdicts;
}

std::string Needle2File(const std::string& path) {
  EXPECT_NE(SyntheticNeedle2(path), nullptr);
  return path;
}

Json Record(const Json& tools, const ToolCallResult& r) {
  return Json{{"tools", tools}, {"text", r.text}, {"tool_calls", r.tool_calls}};
}

void ExpectAllValid(const std::vector<Json>& records) {
  std::string report;
  const std::vector<bool> verdicts = ValidatorVerdicts(records, &report);
  ASSERT_EQ(verdicts.size(), records.size()) << report;
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_TRUE(verdicts[i]) << records[i].dump() << "\n" << report;
}

TEST(ToolCallRunner, GreedyAnswersAreValidForEveryCatalogueOnFixturesAndNeedle2) {
  TempDir tmp;
  const std::vector<std::string> models = {Fixture("tiny", "model.cact"),
                                           Fixture("odd", "model.cact"),
                                           Needle2File(tmp / "needle2.cact")};
  std::vector<Json> records;
  size_t calls = 0;
  for (const std::string& model : models) {
    // needle2's prompts are long (up to 1,400 tokens): one query per catalogue there.
    const bool large = model == models.back();
    for (const Json& catalog : Catalogs()) {
      for (const Json& q : catalog.at("queries")) {
        if (large && &q != &catalog.at("queries")[0]) continue;
        ToolCallRequest req = Request(model, catalog.at("tools"), q.at("query"));
        if (large) req.run.max_new_tokens = 48;
        auto r = RunToolCall(req);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_TRUE(r->valid) << model << " " << catalog.at("id") << ": " << r->invalid_reason;
        EXPECT_LE(r->run.generated_ids.size(), req.run.max_new_tokens);
        calls += r->tool_calls.size();
        records.push_back(Record(catalog.at("tools"), *r));
      }
    }
  }
  ExpectAllValid(records);
  std::printf("  %zu greedy answers, %zu calls\n", records.size(), calls);
}

// Temperature 1.5 on a random model: the grammar alone keeps the answers valid. Budgets from
// 8 tokens up exercise the closing rules; think budgets from 0 the forced </think>.
TEST(ToolCallRunner, SampledAnswersAreValidOverAThousandSeeds) {
  const Json& catalogs = Catalogs();
  std::vector<Json> records;
  size_t calls = 0, forced = 0, with_think = 0;
  // Every fifth seed on odd (its retrieval runs the contrastive head over every
  // declaration, which makes each answer slower), the others on tiny.
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    const Json& catalog = catalogs[seed % catalogs.size()];
    const Json& queries = catalog.at("queries");
    ToolCallRequest req =
        Request(Fixture(seed % 5 == 4 ? "odd" : "tiny", "model.cact"), catalog.at("tools"),
                queries[(seed / catalogs.size()) % queries.size()].at("query"));
    req.run.sampling = {.temperature = 1.5f, .seed = seed};
    req.run.max_new_tokens = uint32_t(8 + seed % 57);
    req.think_max = uint32_t(seed % 9);
    auto r = RunToolCall(req);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->valid) << "seed " << seed << ": " << r->invalid_reason << "\n" << r->text;
    EXPECT_LE(r->run.generated_ids.size(), req.run.max_new_tokens) << "seed " << seed;
    calls += r->tool_calls.size();
    forced += r->grammar.forced_tokens;
    with_think += !r->reasoning.empty() || r->text.starts_with("<think>");
    records.push_back(Record(catalog.at("tools"), *r));
  }
  ExpectAllValid(records);
  // The sweep must reach the interesting cases, or it proves little.
  EXPECT_GT(calls, 80u);
  EXPECT_GT(with_think, 100u);
  EXPECT_GT(forced, 1000u);
  std::printf("  1000 sampled answers: %zu calls, %zu with a think block, %zu forced tokens\n",
              calls, with_think, forced);
}

// Tokens the grammar leaves no choice (closings, forced think exits, single allowed tokens)
// are fed together: the answer, the states the confidence head pools and the sampler's
// draws are those of a step per token, on both paths and under sampling.
TEST(ToolCallRunner, ChoicelessTokensFedTogetherGiveTheSameAnswerAndConfidence) {
  const Json& catalogs = Catalogs();
  uint32_t steps = 0, feeds = 0, only = 0, runs = 0;
  for (uint64_t seed = 0; seed < 48; ++seed) {
    const Json& catalog = catalogs[seed % catalogs.size()];
    const Json& queries = catalog.at("queries");
    ToolCallRequest req = Request(Fixture(seed % 2 ? "odd" : "tiny", "model.cact"),
                                  catalog.at("tools"), queries[seed % queries.size()].at("query"));
    req.run.path = seed % 3 == 0 ? "ref" : "fast";
    if (seed % 4 != 0) req.run.sampling = {.temperature = 1.2f, .seed = seed};
    req.run.max_new_tokens = uint32_t(10 + seed % 40);
    req.think_max = uint32_t(seed % 6);
    auto together = RunToolCall(req);
    req.feed_choiceless_together = false;
    auto stepwise = RunToolCall(req);
    ASSERT_TRUE(together.ok() && stepwise.ok()) << together.status() << stepwise.status();
    EXPECT_EQ(together->run.generated_ids, stepwise->run.generated_ids) << "seed " << seed;
    EXPECT_EQ(together->text, stepwise->text) << "seed " << seed;
    EXPECT_EQ(together->run.timings.decode_steps, stepwise->run.timings.decode_steps);
    EXPECT_EQ(stepwise->run.timings.decode_feeds, stepwise->run.timings.decode_steps);
    ASSERT_EQ(together->confidence.has_value(), stepwise->confidence.has_value());
    if (together->confidence) {
      EXPECT_EQ(*together->confidence, *stepwise->confidence) << seed;
    }
    steps += together->run.timings.decode_steps;
    feeds += together->run.timings.decode_feeds;
    only += together->grammar.only_choices;
    ++runs;
  }
  // The sweep must feed runs together, or it proves nothing.
  EXPECT_LT(feeds + runs, steps);
  EXPECT_GT(only, 0u);
  std::printf("  %u runs: %u tokens fed in %u calls (%u single-choice tokens)\n", runs, steps,
              feeds, only);
}

// A caller's trie (eval and batch mode build one per model) gives the same answers as the
// trie a call builds for itself.
TEST(ToolCallRunner, ACallersTrieGivesTheSameAnswers) {
  const Json& catalogs = Catalogs();
  const std::string path = Fixture("tiny", "model.cact");
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(path);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Tokenizer> tok =
      Tokenizer::FromBytes((*model)->file().tokenizer_blob(), (*model)->path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const VocabularyTrie trie(*tok);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const Json& catalog = catalogs[seed % catalogs.size()];
    const Json& queries = catalog.at("queries");
    ToolCallRequest req =
        Request(path, catalog.at("tools"), queries[seed % queries.size()].at("query"));
    req.run.sampling = {.temperature = 1.2f, .seed = seed};
    auto own = RunToolCall(req);
    req.run.model = model->get();
    req.run.tokenizer = &*tok;
    req.trie = &trie;
    auto shared = RunToolCall(req);
    ASSERT_TRUE(own.ok() && shared.ok()) << own.status() << shared.status();
    EXPECT_EQ(own->run.generated_ids, shared->run.generated_ids) << "seed " << seed;
    EXPECT_EQ(own->text, shared->text) << "seed " << seed;
    EXPECT_EQ(own->tool_calls, shared->tool_calls) << "seed " << seed;
  }
}

// Free decoding: the answer's verdict (the grammar read back) agrees with the validator's,
// and a random model does write invalid answers, so the check is not vacuous.
TEST(ToolCallRunner, FreeDecodingVerdictAgreesWithTheValidator) {
  const Json& catalog = Catalogs()[0];
  std::vector<Json> records;
  std::vector<bool> ours;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    ToolCallRequest req = Request(Fixture("tiny", "model.cact"), catalog.at("tools"),
                                  catalog.at("queries")[0].at("query"));
    req.grammar = false;
    req.run.sampling = {.temperature = 1.0f, .seed = seed};
    req.run.max_new_tokens = 24;
    auto r = RunToolCall(req);
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->valid) {
      EXPECT_FALSE(r->invalid_reason.empty());
    }
    ours.push_back(r->valid);
    records.push_back(Record(catalog.at("tools"), *r));
  }
  std::string report;
  const std::vector<bool> theirs = ValidatorVerdicts(records, &report);
  ASSERT_EQ(theirs.size(), ours.size()) << report;
  EXPECT_EQ(theirs, ours) << report;
  EXPECT_NE(std::count(ours.begin(), ours.end(), false), 0);
}

TEST(ToolCallRunner, PromptIdsMatchTheOfficialRenderingOnNeedle2) {
  TempDir tmp;
  const std::string model = Needle2File(tmp / "needle2.cact");
  const Json tools = Json::parse(R"([
    {"name": "r\u00e9server_h\u00f4tel", "description": "R\u00e9serve une chambre \u00e0 Lyon: \"vite\" \\ \u65e5",
     "parameters": {"type": "object", "properties": {"ville": {"type": "string", "enum": ["Lyon", "S\u00e8te"]}}}},
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  const std::string query = "Une chambre \xC3\xA0 S\xC3\xA8te, s'il vous pla\xC3\xAEt";
  std::ofstream(tmp / "tools.json") << tools.dump();
  std::ofstream(tmp / "query.txt") << query;
  std::ofstream(tmp / "system.txt") << "  Be brief. ";
  CommandResult o = cact::testing::Run(
      Python() + " " + CACT_SOURCE_DIR + "/tests/engine/chat_oracle.py " + CACT_SOURCE_DIR +
      "/quant/data/needle2_tokenizer.model " + (tmp / "tools.json") + " " + (tmp / "query.txt") +
      " " + (tmp / "system.txt") + " " + (tmp / "out.json"));
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const Json want = ReadJson(tmp / "out.json");

  ToolCallRequest req = Request(model, tools, query);
  req.system = "  Be brief. ";
  req.run.max_new_tokens = 12;
  auto r = RunToolCall(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->retrieval, "none");
  EXPECT_EQ(r->run.prompt_ids, want.at("ids").get<std::vector<int32_t>>());
  EXPECT_EQ(r->run.sink, want.at("tools_prefix").get<uint32_t>());
}

// More tools than --top-tools: BM25 on a model without a contrastive head, the head on one
// that has it; the kept tools are the best ranked, in declaration order in the prompt.
TEST(ToolCallRunner, RetrievalKeepsTheBestRankedTools) {
  const Json catalog = ReadJson(Data("catalog40.json"));
  const Json& tools = catalog.is_array() ? catalog : catalog.at("tools");
  ASSERT_EQ(tools.size(), 40u);
  const std::string query = "what is the weather forecast for tomorrow";
  for (const char* kase : {"tiny", "odd"}) {
    ToolCallRequest req = Request(Fixture(kase, "model.cact"), tools, query);
    req.top_tools = 3;
    req.run.max_new_tokens = 16;
    auto r = RunToolCall(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->retrieval, std::string(kase) == "odd" ? "contrastive" : "bm25");
    ASSERT_EQ(r->tools.size(), 40u);
    size_t kept = 0;
    for (const ToolConsidered& t : r->tools) {
      kept += t.kept;
      EXPECT_GE(t.rank, 1u);
      if (t.kept) {
        EXPECT_EQ(t.dropped_by, "");
      } else {
        EXPECT_TRUE(t.dropped_by == "rank" || t.dropped_by == "context") << t.dropped_by;
      }
      // Every kept tool outranks every tool dropped for its rank.
      for (const ToolConsidered& u : r->tools)
        if (t.kept && !u.kept && u.dropped_by == "rank") {
          EXPECT_LT(t.rank, u.rank);
        }
    }
    EXPECT_GE(kept, 1u);
    EXPECT_LE(kept, 3u);
    if (std::string(kase) == "tiny") {
      // BM25 by the library on the same texts: the same best tool.
      std::vector<ToolText> texts;
      for (const Json& t : tools) {
        const Json& fn = t.contains("function") ? t.at("function") : t;
        texts.push_back({fn.at("name"), fn.value("description", "")});
      }
      const auto ranking = RankToolsBm25(query, texts);
      EXPECT_EQ(r->tools[ranking[0].tool].rank, 1u);
    }
    const Json j = Json::parse(ToolCallJson(*r));
    EXPECT_EQ(j.at("tools_considered").size(), 40u);
    EXPECT_TRUE(j.at("valid").get<bool>());
  }
}

// A catalogue that does not fit the context: the tools that fit are kept, the JSON says
// which were dropped for room.
TEST(ToolCallRunner, ACatalogueTooBigForTheContextIsPruned) {
  const Json& catalog = Catalogs()[1];  // eight tools
  ASSERT_EQ(catalog.at("tools").size(), 8u);
  ToolCallRequest req = Request(Fixture("tiny", "model.cact"), catalog.at("tools"), "hello");
  req.run.max_new_tokens = 16;
  auto r = RunToolCall(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const Json j = Json::parse(ToolCallJson(*r));
  size_t by_context = 0;
  for (const Json& t : j.at("tools_considered"))
    by_context += t.value("dropped_by", "") == std::string("context");
  EXPECT_GT(by_context, 0u) << j.dump();
  EXPECT_LE(r->run.prompt_ids.size() + req.run.max_new_tokens, FixtureModel("tiny").max_seq_len());
  EXPECT_TRUE(r->valid);
}

// The confidence is the head's sigmoid over prompt + answer, as the head scores those
// tokens in one pass; --min-confidence above it suppresses the calls.
TEST(ToolCallRunner, ConfidenceIsTheHeadOverPromptAndAnswer) {
  const Json& catalog = Catalogs()[0];
  ToolCallRequest req = Request(Fixture("odd", "model.cact"), catalog.at("tools"),
                                catalog.at("queries")[0].at("query"));
  req.run.path = "ref";
  auto r = RunToolCall(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->confidence.has_value());
  std::vector<int32_t> fed = r->run.prompt_ids;
  fed.insert(fed.end(), r->run.generated_ids.begin(),
             r->run.generated_ids.begin() + r->run.timings.decode_steps);
  auto want = ScoreCallConfidence(FixtureModel("odd"), "ref", fed);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_NEAR(*r->confidence, want->probability, 1e-5);

  req.min_confidence = std::min(1.0, *r->confidence + 1e-3);
  auto suppressed = RunToolCall(req);
  ASSERT_TRUE(suppressed.ok());
  EXPECT_EQ(suppressed->suppressed, !r->tool_calls.empty());
  EXPECT_TRUE(suppressed->tool_calls.empty());
  req.min_confidence = 0.0;
  auto kept = RunToolCall(req);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->tool_calls, r->tool_calls);

  // A model without the head reports no confidence.
  auto none = RunToolCall(Request(Fixture("tiny", "model.cact"), catalog.at("tools"), "hi"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->confidence.has_value());
}

TEST(ToolCallRunner, BadToolsFilesExitTwoNamingToolAndKeyword) {
  std::ifstream table(Data("bad_tools/expected.tsv"));
  size_t checked = 0;
  for (std::string line; std::getline(table, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::string file, tool, keyword;
    std::getline(cols, file, '\t');
    std::getline(cols, tool, '\t');
    std::getline(cols, keyword, '\t');
    const std::string path = Data("bad_tools/" + file);
    CommandResult r = cact::testing::Run(Tool("cact-run") + " " + Fixture("tiny", "model.cact") +
                                         " --tools " + path + " --query q 2>&1");
    EXPECT_EQ(r.exit_code, 2) << file << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
    if (tool != "-") {
      EXPECT_NE(r.output.find("\"" + tool + "\""), std::string::npos) << r.output;
    }
    EXPECT_NE(r.output.find(keyword), std::string::npos) << file << ": " << r.output;
    ++checked;
  }
  EXPECT_GE(checked, 30u);
}

TEST(ToolCallRunner, BudgetTooSmallForAnyAnswerIsAClearError) {
  const Json& catalog = Catalogs()[0];
  ToolCallRequest req = Request(Fixture("tiny", "model.cact"), catalog.at("tools"), "q");
  req.run.max_new_tokens = 2;
  auto r = RunToolCall(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("too small for a tool call"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace cact::testing
