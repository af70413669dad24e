// Tool retrieval: the BM25 ranking against an independent Python oracle
// (tests/engine/bm25_oracle.py) on a 40-tool catalogue, the top-k / token-budget selection,
// and the probe-head paths (contrastive embedding, call confidence) on the fixture models.
#include "engine/toolcall/tool_retrieval.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/forward.h"
#include "engine/probe_heads.h"
#include "engine_test_util.h"

namespace cact::testing {
namespace {

const std::string kCatalog = std::string(CACT_SOURCE_DIR) + "/tests/engine/data/catalog40.json";

nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::vector<ToolText> CatalogTools() {
  std::vector<ToolText> tools;
  const nlohmann::json catalog = ReadJsonFile(kCatalog);
  for (const auto& t : catalog.at("tools"))
    tools.push_back({t.at("name").get<std::string>(), t.at("description").get<std::string>()});
  return tools;
}

std::vector<size_t> Order(const std::vector<ToolScore>& ranking) {
  std::vector<size_t> order;
  for (const ToolScore& s : ranking) order.push_back(s.tool);
  return order;
}

TEST(ToolRetrieval, TermsSplitCasesAndKeepNonAscii) {
  EXPECT_EQ(RetrievalTerms("getWeatherNow"), (std::vector<std::string>{"get", "weather", "now"}));
  EXPECT_EQ(RetrievalTerms("set_lights make-phone-call"),
            (std::vector<std::string>{"set", "lights", "make", "phone", "call"}));
  EXPECT_EQ(RetrievalTerms("HTTPServer"), (std::vector<std::string>{"http", "server"}));
  EXPECT_EQ(RetrievalTerms("Réserver un café"),
            (std::vector<std::string>{"réserver", "un", "café"}));
  EXPECT_TRUE(RetrievalTerms(" __--!? ").empty());
}

TEST(ToolRetrieval, Bm25MatchesPythonOracle) {
  TempDir dir;
  CommandResult r =
      cact::testing::Run(Python() + " " + CACT_SOURCE_DIR + "/tests/engine/bm25_oracle.py " +
                         kCatalog + " " + (dir / "out.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json want = ReadJsonFile(dir / "out.json");
  const std::vector<ToolText> tools = CatalogTools();
  ASSERT_EQ(tools.size(), 40u);

  for (const auto& [text, terms] : want.at("terms").items())
    EXPECT_EQ(RetrievalTerms(text), terms.get<std::vector<std::string>>()) << text;

  const auto& queries = want.at("queries");
  ASSERT_GE(queries.size(), 6u);
  for (const auto& q : queries) {
    const std::string query = q.at("query").get<std::string>();
    const auto scores = q.at("scores").get<std::vector<double>>();
    const std::vector<ToolScore> got = RankToolsBm25(query, tools);
    ASSERT_EQ(got.size(), tools.size());
    for (const ToolScore& s : got) {
      const double w = scores[s.tool];
      EXPECT_LE(std::abs(s.score - w), 1e-9 * std::abs(w)) << query << " tool " << s.tool;
    }
    EXPECT_EQ(Order(got), q.at("ranking").get<std::vector<size_t>>()) << query;
  }
}

TEST(ToolRetrieval, Bm25RanksTheObviousToolFirstAndBreaksTiesByDeclaration) {
  const std::vector<ToolText> tools = CatalogTools();
  auto best = [&](const std::string& query) { return tools[RankToolsBm25(query, tools)[0].tool]; };
  EXPECT_EQ(best("send a text message to mom").name, "sendSMS");
  EXPECT_EQ(best("réserver une table pour deux au café").name, "reserver_restaurant");
  EXPECT_EQ(best("what is my heart rate").name, "get_heart_rate");
  // Nothing matches: every score 0, declaration order.
  const std::vector<ToolScore> none = RankToolsBm25("zzz", tools);
  for (size_t i = 0; i < none.size(); ++i) {
    EXPECT_EQ(none[i].tool, i);
    EXPECT_EQ(none[i].score, 0.0);
  }
  // Two identical tools tie; the earlier one ranks first wherever they are declared.
  const std::vector<ToolText> twins = {
      {"other", "unrelated words"}, {"get_weather", "weather now"}, {"get_weather", "weather now"}};
  const std::vector<ToolScore> r = RankToolsBm25("weather", twins);
  EXPECT_EQ(Order(r), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(r[0].score, r[1].score);
  EXPECT_GT(r[0].score, 0.0);
}

std::vector<ToolScore> Ranking(std::vector<size_t> order) {
  std::vector<ToolScore> r;
  for (size_t i = 0; i < order.size(); ++i) r.push_back({order[i], 10.0 - double(i)});
  return r;
}

TEST(ToolRetrieval, SelectKeepsTopKInDeclarationOrder) {
  const std::vector<ToolScore> ranking = Ranking({4, 1, 6, 0, 3, 5, 2});
  const std::vector<size_t> cost(7, 10);
  auto sel = SelectTools(ranking, cost, 3, 1000);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->kept, (std::vector<size_t>{1, 4, 6}));
  ASSERT_EQ(sel->tools.size(), 7u);
  const std::vector<size_t> rank = {4, 2, 7, 5, 1, 6, 3};
  for (size_t t = 0; t < 7; ++t) {
    const ToolSelectionEntry& e = sel->tools[t];
    EXPECT_EQ(e.rank, rank[t]) << t;
    EXPECT_EQ(e.score, 10.0 - double(rank[t] - 1)) << t;
    EXPECT_EQ(e.kept, rank[t] <= 3) << t;
    EXPECT_EQ(ToolDropName(e.drop), std::string(rank[t] <= 3 ? "" : "rank")) << t;
  }
}

TEST(ToolRetrieval, SelectSkipsWhatDoesNotFitAndTriesTheNext) {
  // Best is tool 2 (cost 50), then tool 0 (cost 60: 110 > 100, skipped), then tool 1
  // (cost 40: 90 fits), then tool 3 (cost 5: 95 fits).
  const std::vector<ToolScore> ranking = Ranking({2, 0, 1, 3});
  const std::vector<size_t> cost = {60, 40, 50, 5};
  auto sel = SelectTools(ranking, cost, 3, 100);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->kept, (std::vector<size_t>{1, 2, 3}));
  EXPECT_FALSE(sel->tools[0].kept);
  EXPECT_EQ(sel->tools[0].drop, ToolDrop::kContext);
  EXPECT_STREQ(ToolDropName(sel->tools[0].drop), "context");
  EXPECT_EQ(sel->tools[0].rank, 2u);
  // With top_k = 2 the skipped tool does not use up a slot: tools 2 and 1 are kept and the
  // fourth-ranked one is out by rank although it would fit.
  auto two = SelectTools(ranking, cost, 2, 100);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->kept, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(two->tools[0].drop, ToolDrop::kContext);
  EXPECT_EQ(two->tools[3].drop, ToolDrop::kRank);
  // An exact fit is kept.
  auto exact = SelectTools(ranking, cost, 4, 95);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->kept, (std::vector<size_t>{1, 2, 3}));
}

TEST(ToolRetrieval, SelectPrunesACatalogueTooBigForTheBudget) {
  const std::vector<ToolText> tools = CatalogTools();
  const std::vector<ToolScore> ranking =
      RankToolsBm25("turn off the lights and lock the door", tools);
  const std::vector<size_t> cost(tools.size(), 30);
  auto sel = SelectTools(ranking, cost, tools.size(), 100);  // room for 3 of 40
  ASSERT_TRUE(sel.ok()) << sel.status();
  std::vector<size_t> best3 = {ranking[0].tool, ranking[1].tool, ranking[2].tool};
  std::sort(best3.begin(), best3.end());
  EXPECT_EQ(sel->kept, best3);
  size_t context = 0;
  for (const ToolSelectionEntry& e : sel->tools) context += e.drop == ToolDrop::kContext;
  EXPECT_EQ(context, tools.size() - 3);
  // The official default: five of the forty, nothing dropped for context.
  auto five = SelectTools(ranking, cost, kOfficialRetrievalTopK, SIZE_MAX);
  ASSERT_TRUE(five.ok());
  EXPECT_EQ(five->kept.size(), 5u);
  EXPECT_EQ(tools[ranking[0].tool].name, "set_lights");
}

TEST(ToolRetrieval, SelectRejectsABadRanking) {
  const std::vector<size_t> cost(3, 1);
  EXPECT_FALSE(SelectTools(Ranking({0, 1}), cost, 3, 10).ok());     // a tool missing
  EXPECT_FALSE(SelectTools(Ranking({0, 1, 1}), cost, 3, 10).ok());  // a tool twice
  EXPECT_FALSE(SelectTools(Ranking({0, 1, 3}), cost, 3, 10).ok());  // out of range
}

TEST(ToolRetrieval, EmbeddingRankingIsTheDotProduct) {
  const std::vector<float> q = {0.6f, 0.8f, 0.0f};
  const std::vector<std::vector<float>> tools = {
      {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0.6f, 0.8f, 0}, {0, 1, 0}};
  auto r = RankToolsByEmbedding(q, tools);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Order(*r), (std::vector<size_t>{3, 1, 4, 0, 2}));  // 1 and 4 tie: declaration order
  EXPECT_NEAR((*r)[0].score, 1.0, 1e-6);
  EXPECT_NEAR((*r)[1].score, 0.8, 1e-6);
  EXPECT_NEAR((*r)[3].score, 0.6, 1e-6);
  const std::vector<std::vector<float>> bad = {{1, 0, 0}, {1, 0}};
  EXPECT_FALSE(RankToolsByEmbedding(q, bad).ok());
}

// The probe heads of the odd fixture on the official hidden states of sequence `seq`.
ProbeOutputs OfficialProbes(const std::string& seq) {
  NpyArray hidden = LoadNpy(Fixture("odd", "hidden_" + seq + ".npy"));
  auto out = ComputeProbeHeads(FixtureModel("odd"), FixtureTokens("odd", seq), hidden.data);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : ProbeOutputs{};
}

TEST(ToolRetrieval, ContrastiveEmbeddingOnTheOddFixture) {
  const Model& model = FixtureModel("odd");
  // Against the probe heads on the official hidden states of the same tokens; s1 contains
  // PAD, which the head must leave out.
  for (const std::string seq : {"s1", "s2"}) {
    const std::vector<float> want = OfficialProbes(seq).retrieval;
    auto got = ContrastiveEmbedding(model, "ref", FixtureTokens("odd", seq));
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size());
    ASSERT_FALSE(got->empty());
    for (size_t i = 0; i < got->size(); ++i) EXPECT_NEAR((*got)[i], want[i], 1e-4) << seq << i;
  }
  const std::vector<int32_t> s2 = FixtureTokens("odd", "s2");
  auto emb = ContrastiveEmbedding(model, "ref", s2);
  ASSERT_TRUE(emb.ok());

  // Tools embedded from different token sequences; the query is one of them.
  std::vector<std::vector<int32_t>> tool_tokens = {
      {s2.begin(), s2.begin() + long(s2.size() / 2)}, s2, FixtureTokens("odd", "s1")};
  std::reverse(tool_tokens[0].begin(), tool_tokens[0].end());
  std::vector<std::vector<float>> tool_emb;
  for (const auto& t : tool_tokens) {
    auto e = ContrastiveEmbedding(model, "ref", t);
    ASSERT_TRUE(e.ok()) << e.status();
    tool_emb.push_back(*e);
  }
  auto r = RankToolsByEmbedding(*emb, tool_emb);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].tool, 1u);
  EXPECT_NEAR((*r)[0].score, 1.0, 1e-5);
  for (const ToolScore& s : *r) {
    double dot = 0;
    for (size_t i = 0; i < emb->size(); ++i) dot += double((*emb)[i]) * tool_emb[s.tool][i];
    EXPECT_NEAR(s.score, dot, 1e-9);
  }
  EXPECT_LT((*r)[2].score, (*r)[0].score - 1e-3);  // the sequences really differ

  // The int8 path gives nearly the same direction.
  auto fast = ContrastiveEmbedding(model, "fast", s2);
  ASSERT_TRUE(fast.ok()) << fast.status();
  double cos = 0;
  for (size_t i = 0; i < emb->size(); ++i) cos += double((*emb)[i]) * (*fast)[i];
  EXPECT_GT(cos, 0.99);
}

TEST(ToolRetrieval, CallConfidenceOnTheOddFixture) {
  const Model& model = FixtureModel("odd");
  const ProbeOutputs official = OfficialProbes("s2");
  ASSERT_TRUE(official.has_confidence);
  auto c = ScoreCallConfidence(model, "ref", FixtureTokens("odd", "s2"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->logit, official.confidence, 1e-4);
  EXPECT_NEAR(c->probability, 1.0 / (1.0 + std::exp(-double(official.confidence))), 1e-5);
  EXPECT_GT(c->probability, 0.0);
  EXPECT_LT(c->probability, 1.0);
}

TEST(ToolRetrieval, ClearErrorsWithoutHeadsOrTokens) {
  const Model& tiny = FixtureModel("tiny");
  ASSERT_EQ(tiny.FindProbeHead(ProbeHead::kContrastive), nullptr);
  const std::vector<int32_t> tokens = {2, 5, 7};
  auto emb = ContrastiveEmbedding(tiny, "ref", tokens);
  ASSERT_FALSE(emb.ok());
  EXPECT_TRUE(absl::IsNotFound(emb.status())) << emb.status();
  EXPECT_NE(emb.status().message().find("contrastive"), std::string_view::npos);
  EXPECT_TRUE(absl::IsNotFound(ScoreCallConfidence(tiny, "ref", tokens).status()));

  const Model& odd = FixtureModel("odd");
  EXPECT_FALSE(ContrastiveEmbedding(odd, "ref", std::vector<int32_t>{}).ok());
  EXPECT_FALSE(ContrastiveEmbedding(odd, "no-such-path", tokens).ok());
}

}  // namespace
}  // namespace cact::testing
