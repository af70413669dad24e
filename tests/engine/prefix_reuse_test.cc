// Reusing the tools prefix across runs changes no result: for a sequence of queries over two
// tool sets and two system turns (so prefixes repeat, alternate and differ), every run with
// reuse gives the same generated ids and bit-identical last-position logits as the same run
// without it, on the fast and the reference paths; and the prefixes are reused.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/generate/prefix_reuse.h"
#include "engine/generate/runner.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::ReadText;

TEST(PrefixReuse, SameIdsAndLogitsWithAndWithoutReuse) {
  const std::string dir = std::string(CACT_SOURCE_DIR) + "/docs/reference-model/";
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(dir + "reference.cact");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<Tokenizer> tok =
      Tokenizer::FromBytes((*model)->file().tokenizer_blob(), (*model)->path());
  ASSERT_TRUE(tok.ok());
  const std::string three = ReadText(dir + "tools.json");
  const std::string one =
      R"([{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}])";
  struct Query {
    const std::string* tools;
    const char* query;
    const char* system;
  };
  const std::vector<Query> queries = {
      {&three, "What is the weather in Oslo?", nullptr},
      {&three, "Start a timer for 5 minutes", nullptr},
      {&one, "Is it raining in Quito?", nullptr},
      {&three, "Tell me a joke", "Be brief."},
      {&three, "Find the package curl", nullptr},
      {&one, "Weather in Lima?", nullptr},
  };
  testing::TempDir tmp;
  for (const char* path : {"fast", "ref"}) {
    PrefixReuse reuse;
    for (size_t i = 0; i < queries.size(); ++i) {
      std::vector<int32_t> ids[2];
      std::vector<uint8_t> logits[2];
      for (int with = 0; with < 2; ++with) {
        RunRequest req;
        req.model = model->get();
        req.tokenizer = &*tok;
        req.path = path;
        req.threads = 2;
        req.tools_json = *queries[i].tools;
        req.query = queries[i].query;
        if (queries[i].system) req.system = queries[i].system;
        req.max_new_tokens = 12;
        req.ignore_eos = true;
        req.logits_path = tmp / ("l" + std::to_string(with) + ".npy");
        req.last_only = true;
        if (with) req.prefix_reuse = &reuse;
        absl::StatusOr<RunResult> r = RunModel(req, nullptr);
        ASSERT_TRUE(r.ok()) << r.status();
        ids[with] = r->generated_ids;
        logits[with] = testing::ReadAll(req.logits_path);
        EXPECT_EQ(r->prefix_reused, with && (i == 1 || i == 4 || i == 5)) << path << " " << i;
      }
      EXPECT_EQ(ids[0], ids[1]) << path << " query " << i;
      EXPECT_EQ(logits[0], logits[1]) << path << " query " << i;
      EXPECT_EQ(ids[0].size(), 12u);
    }
    EXPECT_EQ(reuse.hits(), 3u) << path;
    EXPECT_EQ(reuse.misses(), 3u) << path;
  }
}

}  // namespace
}  // namespace cact
