// Choosing which declared tools enter the prompt when there are too many for the context.
// The official engine embeds each tool and the query with the contrastive probe head and
// keeps the five best by dot product (docs/tool-retrieval-notes.md); BM25 over names and
// descriptions ranks without a model head. SelectTools then applies top-k and a token budget.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model.h"

namespace cact {

// The official engine renders five tools or fewer directly and retrieves above that.
inline constexpr size_t kOfficialRetrievalTopK = 5;

struct ToolText {
  std::string name;
  std::string description;
};

// One entry of a ranking: a tool (index in declaration order) and its score.
struct ToolScore {
  size_t tool = 0;
  double score = 0;
};

// The words BM25 counts. Word characters are ASCII letters and digits and every byte of a
// non-ASCII UTF-8 sequence (kept as is, so other scripts still match themselves); anything
// else separates words, so snake_case and kebab-case split. Inside a word a new word starts
// at a lowercase-to-uppercase step ("getWeather" -> get, weather) and before the last capital
// of a capital run followed by a lowercase letter ("HTTPServer" -> http, server). ASCII
// letters are lowercased.
std::vector<std::string> RetrievalTerms(std::string_view text);

// Okapi BM25 of `query` against each tool's name + description (k1 = 1.2, b = 0.75,
// idf = ln(1 + (N - n + 0.5) / (n + 0.5)), never negative; a repeated query term counts once
// per occurrence). Best first; equal scores keep declaration order.
std::vector<ToolScore> RankToolsBm25(std::string_view query, std::span<const ToolText> tools);

// Ranks by dot product of L2-normalised embeddings (= cosine), best first; equal scores keep
// declaration order. Error when a tool's dimension differs from the query's.
absl::StatusOr<std::vector<ToolScore>> RankToolsByEmbedding(
    std::span<const float> query, std::span<const std::vector<float>> tools);

// The contrastive (retrieval) embedding of `tokens`: one forward on the named path
// (MakeForwardPath) keeping hidden states, then the probe head. NotFound when the model has
// no contrastive head, so callers can fall back to BM25.
absl::StatusOr<std::vector<float>> ContrastiveEmbedding(const Model& model,
                                                        std::string_view forward_path,
                                                        std::span<const int32_t> tokens,
                                                        int32_t pad_id = 0);

// The confidence head on a produced call. The official head scores the full prompt followed
// by the generated call tokens, so `prompt_and_call` is that whole sequence. `probability`
// = sigmoid(logit); the official engine escalates (withholds the call) below 0.1, and takes
// the minimum with the call's decoding probability (not computed here).
struct CallConfidence {
  float logit = 0;
  double probability = 0;
};
inline constexpr double kOfficialEscalateBelow = 0.1;
absl::StatusOr<CallConfidence> ScoreCallConfidence(const Model& model,
                                                   std::string_view forward_path,
                                                   std::span<const int32_t> prompt_and_call,
                                                   int32_t pad_id = 0);

// Why a tool stayed out of the prompt: beyond top_k ("rank") or its tokens did not fit the
// budget left by better-ranked tools ("context").
enum class ToolDrop { kKept, kRank, kContext };
const char* ToolDropName(ToolDrop drop);  // "" for kKept, "rank", "context"

struct ToolSelectionEntry {
  double score = 0;
  size_t rank = 0;  // 1 = best
  bool kept = false;
  ToolDrop drop = ToolDrop::kKept;
};

struct ToolSelection {
  std::vector<size_t> kept;               // ascending: the prompt keeps the user's order
  std::vector<ToolSelectionEntry> tools;  // per tool, in declaration order
};

// Walks `ranking` best first and keeps a tool while fewer than `top_k` are kept and its cost
// fits what is left of `token_budget`; a tool that does not fit is skipped and the next one
// tried. `ranking` must name every tool of `per_tool_token_cost` exactly once.
absl::StatusOr<ToolSelection> SelectTools(std::span<const ToolScore> ranking,
                                          std::span<const size_t> per_tool_token_cost, size_t top_k,
                                          size_t token_budget);

}  // namespace cact
