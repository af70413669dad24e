// `cact-run eval` from the command line: every example decoded exactly as a standalone
// `cact-run --tools --query` call decodes it, the totals recounted from the per-example
// results, --compare side by side, and bad rows as one line naming file:line and the field.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::TempDir;
using testing::Tool;

using testing::ReferenceModel;
using testing::ReferenceTools;

// Three rows: one without tools (takes --tools), one expecting a refusal, one with a system
// turn; a blank line between (ignored, as the official reader ignores it).
std::string WriteExamples(const TempDir& dir) {
  const std::string path = dir / "calls.jsonl";
  std::ofstream(path)
      << R"({"query": "What is the weather in Oslo?", "answers": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]})"
      << "\n"
      << R"({"query": "Tell me a joke about cats.", "answers": []})" << "\n\n"
      << R"({"query": "Start a timer for 5 minutes", "answers": [{"name": "set_timer", "arguments": {"minutes": 5}}], "system": "Be brief."})"
      << "\n";
  return path;
}

TEST(EvalCli, EachExampleIsTheStandaloneCallAndTheTotalsAddUp) {
  TempDir dir;
  const std::string data = WriteExamples(dir);
  auto r = testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data +
                        " --tools " + ReferenceTools() + " -t 1 -q --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["examples"], 3);
  const nlohmann::json& m = j["models"][0];
  const nlohmann::json& per = m["per_example"];
  ASSERT_EQ(per.size(), 3u);
  const std::vector<int> lines = {1, 2, 4};
  const std::vector<std::string> systems = {"", "", " --system 'Be brief.'"};
  size_t exact = 0, valid = 0, refusals = 0, refusals_right = 0;
  for (size_t i = 0; i < per.size(); ++i) {
    EXPECT_EQ(per[i]["line"], lines[i]);
    const std::string query = per[i]["query"];
    auto one =
        testing::Run(Tool("cact-run") + " " + ReferenceModel() + " --tools " + ReferenceTools() +
                     " --query '" + query + "'" + systems[i] + " -n 128 -t 1 --json");
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const nlohmann::json alone =
        nlohmann::json::parse(one.output.substr(0, one.output.find('\n')));
    EXPECT_EQ(per[i]["got"], alone["tool_calls"]) << query;
    EXPECT_EQ(per[i]["valid"], alone["valid"]) << query;
    // Exact as JSON values, worked out here: the same calls in any order.
    const bool same = per[i]["expected"] == per[i]["got"];
    EXPECT_EQ(per[i]["exact"], same) << query;
    exact += same;
    valid += per[i]["valid"].get<bool>();
    if (per[i]["expected"].empty()) {
      ++refusals;
      refusals_right += per[i]["got"].empty();
    }
  }
  const nlohmann::json& t = m["totals"];
  EXPECT_EQ(t["exact"]["hits"], exact);
  EXPECT_EQ(t["exact"]["total"], 3);
  EXPECT_EQ(t["valid"]["hits"], valid);
  EXPECT_EQ(t["refusals_right"]["hits"], refusals_right);
  EXPECT_EQ(t["refusals_right"]["total"], refusals);
  // The tools prefix is reused (rows 1 and 2 share it; row 3's system turn makes another),
  // and changes nothing.
  EXPECT_EQ(per[0]["prefix_reused"], false);
  EXPECT_EQ(per[1]["prefix_reused"], true);
  EXPECT_EQ(per[2]["prefix_reused"], false);
  auto whole = testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data +
                            " --tools " + ReferenceTools() + " -t 1 -q --json --no-prefix-reuse");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const nlohmann::json whole_report = nlohmann::json::parse(whole.output);
  const nlohmann::json& per_whole = whole_report["models"][0]["per_example"];
  for (size_t i = 0; i < per.size(); ++i) {
    EXPECT_EQ(per_whole[i]["got"], per[i]["got"]) << i;
    EXPECT_EQ(per_whole[i]["valid"], per[i]["valid"]) << i;
    EXPECT_EQ(per_whole[i]["prefix_reused"], false) << i;
  }
  const double lo = t["exact"]["ci95"][0], hi = t["exact"]["ci95"][1];
  EXPECT_LE(lo, t["exact"]["rate"].get<double>());
  EXPECT_GE(hi, t["exact"]["rate"].get<double>());
}

TEST(EvalCli, CompareShowsBothModelsAndWhatChanged) {
  TempDir dir;
  const std::string data = WriteExamples(dir);
  auto r =
      testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data + " --tools " +
                   ReferenceTools() + " --compare " + ReferenceModel() + " -q --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["models"].size(), 2u);
  // The same model twice: the same answers, nothing fixed or broken.
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(j["models"][0]["per_example"][i]["got"], j["models"][1]["per_example"][i]["got"]);
  EXPECT_TRUE(j["fixed_lines"].empty());
  EXPECT_TRUE(j["broken_lines"].empty());
  auto text =
      testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data + " --tools " +
                   ReferenceTools() + " --compare " + ReferenceModel() + " -q --show-failures 1");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("| exact calls |"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("fixes 0 examples, breaks 0 examples"), std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find("not exact ("), std::string::npos) << text.output;
}

// --prompt-cache: a second process loads the tools prefix from the file and gives the same
// results, example for example; it is refused beside --compare (one model's states) and as
// an input's name.
TEST(EvalCli, PromptCacheLoadsThePrefixInALaterRun) {
  TempDir dir;
  const std::string data = WriteExamples(dir);
  const std::string eval = Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data +
                           " --tools " + ReferenceTools() + " -t 1 --json --prompt-cache " +
                           dir / "calls.pc";
  // The JSON object is the one line of standard output; the cache's line is on stderr.
  auto run = [&](std::string* messages) {
    auto r = testing::Run(eval + " -q");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::istringstream lines(r.output);
    nlohmann::json j;
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line[0] == '{')
        j = nlohmann::json::parse(line);
      else
        *messages += line + "\n";
    return j;
  };
  std::string first_messages, second_messages;
  const nlohmann::json a = run(&first_messages)["models"][0];
  ASSERT_TRUE(std::filesystem::exists(dir / "calls.pc"));
  const nlohmann::json b = run(&second_messages)["models"][0];
  EXPECT_EQ(a["totals"]["exact"], b["totals"]["exact"]);
  ASSERT_EQ(a["per_example"].size(), b["per_example"].size());
  size_t loaded = 0;
  for (size_t i = 0; i < a["per_example"].size(); ++i) {
    EXPECT_EQ(a["per_example"][i]["got"], b["per_example"][i]["got"]) << i;
    EXPECT_FALSE(a["per_example"][i]["prefix_from_file"].get<bool>()) << i;
    loaded += b["per_example"][i]["prefix_from_file"].get<bool>();
  }
  EXPECT_GT(loaded, 0u);
  EXPECT_NE(first_messages.find("tools prefix loaded for 0 examples of 3"), std::string::npos)
      << first_messages;
  EXPECT_NE(second_messages.find("tools prefix loaded for"), std::string::npos)
      << second_messages;

  for (const std::string& flags :
       {" --compare " + ReferenceModel() + " --prompt-cache " + dir / "x.pc",
        " --no-prefix-reuse --prompt-cache " + dir / "x.pc", " --prompt-cache " + data}) {
    auto r = testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " + data +
                          " --tools " + ReferenceTools() + " -q" + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "x.pc"));
  }
}

TEST(EvalCli, BadRowsNameTheFileLineAndField) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"query":"x","answers":[{"name":"nope","arguments":{}}]})",
       ":1: \"answers\": call 1 names 'nope', which the tools do not declare"},
      {R"({"query":"x","answers":{"name":"a"}})", ":1: \"answers\""},
      {R"({"query":"x",)", ":1: malformed JSON"},
      {R"({"query":"x","tools":[{"name":"a","parameters":{"type":"object","properties":{"p":{"type":"frobnicate"}}}}],"answers":[]})",
       ":1: \"tools\": "},
  };
  for (const auto& [row, message] : cases) {
    std::ofstream(dir / "bad.jsonl") << row << "\n";
    auto r = testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " +
                          dir / "bad.jsonl" + " --tools " + ReferenceTools() + " -q");
    EXPECT_EQ(r.exit_code, 2) << row << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_NE(r.output.find("cact-run: " + dir / "bad.jsonl" + message), std::string::npos)
        << row << "\n" << r.output;
  }
  // A row without tools needs --tools.
  std::ofstream(dir / "no_tools.jsonl") << R"({"query":"x","answers":[]})" << "\n";
  auto r = testing::Run(Tool("cact-run") + " eval " + ReferenceModel() + " -f " +
                        dir / "no_tools.jsonl");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(":1: \"tools\": the row declares none and no --tools was given"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cact
