// `cact-run --prompt-cache` and `--batch` from the command line: the answers (ids, text,
// calls) are the same as plain calls whether the tools prefix was computed, reused in the
// process or loaded from the file; a stale or damaged cache is rebuilt with one line; a
// file that is not a prompt cache (or an input) is refused and left as it was.
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

using testing::ReadText;
using testing::ReferenceModel;
using testing::ReferenceTools;

// The JSON lines of an output (stderr lines interleaved are skipped).
std::vector<nlohmann::json> JsonLines(const std::string& output) {
  std::vector<nlohmann::json> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("{")) out.push_back(nlohmann::json::parse(line));
  return out;
}

const std::vector<std::string> kQueries = {"What is the weather in Oslo?",
                                           "Start a timer for 5 minutes", "Tell me a joke"};

// What a plain call answers (no reuse of any kind).
nlohmann::json Plain(const std::string& query, const std::string& path) {
  auto r = testing::Run(Tool("cact-run") + " " + ReferenceModel() + " --tools " + ReferenceTools() +
                        " --query '" + query + "' --path " + path + " -t 2 --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return JsonLines(r.output).at(0);
}

void ExpectSameAnswer(const nlohmann::json& got, const nlohmann::json& want,
                      const std::string& what) {
  EXPECT_EQ(got["prompt_ids"], want["prompt_ids"]) << what;
  EXPECT_EQ(got["generated_ids"], want["generated_ids"]) << what;
  EXPECT_EQ(got["text"], want["text"]) << what;
  EXPECT_EQ(got["tool_calls"], want["tool_calls"]) << what;
  EXPECT_EQ(got["valid"], want["valid"]) << what;
}

TEST(PromptCacheCli, ComputedReusedAndLoadedPrefixesGiveThePlainAnswers) {
  TempDir dir;
  const std::string queries = dir / "queries.txt";
  std::ofstream(queries) << kQueries[0] << "\n"
                         << kQueries[1] << "\r\n\n  \n"
                         << kQueries[2] << "\n";
  for (const std::string path : {"fast", "ref"}) {
    const std::string cache = dir / (path + ".pc");
    std::vector<nlohmann::json> plain;
    for (const std::string& q : kQueries) plain.push_back(Plain(q, path));

    // Single calls: the first computes and saves the prefix, the second loads it.
    for (const char* expect : {"computed and saved", "loaded"}) {
      auto r = testing::Run(Tool("cact-run") + " " + ReferenceModel() + " --tools " +
                            ReferenceTools() + " --query '" + kQueries[0] + "' --path " + path +
                            " -t 2 --json --prompt-cache " + cache);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      EXPECT_NE(r.output.find("prompt cache " + cache + ": tools prefix of 376 tokens " + expect),
                std::string::npos)
          << r.output;
      const nlohmann::json j = JsonLines(r.output).at(0);
      ExpectSameAnswer(j, plain[0], path + " single call, prefix " + expect);
      EXPECT_EQ(j["prefix_from_file"], std::string(expect) == "loaded");
    }

    // A batch: one result per query line, in order, with its line number; the prefix is
    // loaded from the file for each.
    auto r =
        testing::Run(Tool("cact-run") + " " + ReferenceModel() + " --tools " + ReferenceTools() +
                     " --batch " + queries + " --path " + path + " -t 2 --prompt-cache " + cache);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<nlohmann::json> lines = JsonLines(r.output);
    ASSERT_EQ(lines.size(), 3u) << r.output;
    const std::vector<int> line_no = {1, 2, 5};
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(lines[i]["line"], line_no[i]);
      EXPECT_EQ(lines[i]["query"], kQueries[i]);
      ExpectSameAnswer(lines[i], plain[i], path + " batch line " + std::to_string(i));
      EXPECT_EQ(lines[i]["prefix_from_file"], true);
      EXPECT_EQ(lines[i]["prefix_reused"], true);
    }
    EXPECT_NE(r.output.find("3 queries answered, 0 invalid, 0 failed; tools prefix fed 0, "
                            "reused 0, loaded 3"),
              std::string::npos)
        << r.output;

    // A batch from standard input without a cache: fed once, reused twice.
    r = testing::Run("cat " + queries + " | " + Tool("cact-run") + " " + ReferenceModel() +
                     " --tools " + ReferenceTools() + " --batch - --path " + path + " -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(JsonLines(r.output).size(), 3u);
    for (size_t i = 0; i < 3; ++i)
      ExpectSameAnswer(JsonLines(r.output)[i], plain[i], path + " batch from stdin");
    EXPECT_NE(r.output.find("tools prefix fed 1, reused 2, loaded 0"), std::string::npos)
        << r.output;
  }
}

TEST(PromptCacheCli, StaleOrDamagedCachesAreRebuiltOthersRefused) {
  TempDir dir;
  const std::string cache = dir / "tools.pc";
  const std::string call = Tool("cact-run") + " " + ReferenceModel() + " --tools " +
                           ReferenceTools() + " --query '" + kQueries[0] +
                           "' -t 2 --json --prompt-cache ";
  const nlohmann::json plain = Plain(kQueries[0], "fast");
  ASSERT_EQ(testing::Run(call + cache).exit_code, 0);

  // Damaged: one byte of the state changed.
  std::string bytes = ReadText(cache);
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(cache, std::ios::binary) << bytes;
  auto r = testing::Run(call + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cact-run: prompt cache " + cache + ": " + cache +
                          ": checksum at offset 12: the SHA-256 of the bytes "
                          "after it does not match (damaged or truncated); rebuilt"),
            std::string::npos)
      << r.output;
  ExpectSameAnswer(JsonLines(r.output).at(0), plain, "after a damaged cache");
  r = testing::Run(call + cache);
  EXPECT_NE(r.output.find("tools prefix of 376 tokens loaded"), std::string::npos) << r.output;

  // Stale: made for another window (another numerics of the same model and tools).
  r = testing::Run(call + cache + " --window 128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("made with window 256 and the prefix pinned, this run uses 128 and the prefix "
                         "pinned; rebuilt"),
            std::string::npos)
      << r.output;

  // Truncated.
  bytes = ReadText(cache);
  std::ofstream(cache, std::ios::binary) << bytes.substr(0, 100);
  r = testing::Run(call + cache + " --window 128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(damaged or truncated); rebuilt"), std::string::npos) << r.output;

  // Not a prompt cache: refused, untouched.
  const std::string notes = dir / "notes.txt";
  std::ofstream(notes) << "my notes\n";
  r = testing::Run(call + notes);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "cact-run: " + notes +
                          ": not a cact prompt cache (it does not start with \"CACTPCF\\n\"); "
                          "give --prompt-cache a new file name\n");
  EXPECT_EQ(ReadText(notes), "my notes\n");
  // An input: refused before any work.
  const std::string model_before = ReadText(ReferenceModel());
  r = testing::Run(call + ReferenceModel());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--prompt-cache"), std::string::npos) << r.output;
  EXPECT_TRUE(ReadText(ReferenceModel()) == model_before);
  // A directory.
  r = testing::Run(call + dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--prompt-cache is not a regular file"), std::string::npos) << r.output;

  // Flags that do not go together.
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {" --prompt-cache " + cache + " -p hello", "--prompt-cache needs --tools"},
           {" --tools " + ReferenceTools() + " --batch - --query hi",
            "--batch takes the queries from its file, not --query"},
           {" --tools " + ReferenceTools() + " --prompt-cache " + cache,
            "--prompt-cache needs --query or --batch"}}) {
    r = testing::Run(Tool("cact-run") + " " + ReferenceModel() + flags + " </dev/null");
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

TEST(PromptCacheCli, ABadQueryLineIsReportedAndTheRestAnswered) {
  TempDir dir;
  const std::string queries = dir / "queries.txt";
  std::ofstream(queries) << kQueries[0] << "\n"
                         << std::string(3000, 'x') << "\n"
                         << kQueries[2] << "\n";
  auto r = testing::Run(Tool("cact-run") + " " + ReferenceModel() + " --tools " + ReferenceTools() +
                        " --batch " + queries + " -t 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::vector<nlohmann::json> lines = JsonLines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_TRUE(lines[1].contains("error")) << lines[1];
  EXPECT_FALSE(lines[0].contains("error"));
  EXPECT_FALSE(lines[2].contains("error"));
  EXPECT_NE(r.output.find("cact-run: " + queries + ":2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 queries answered, 0 invalid, 1 failed"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cact
