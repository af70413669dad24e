#include "engine/toolcall/tool_retrieval.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "engine/forward_paths.h"
#include "engine/probe_heads.h"

namespace cact {
namespace {

constexpr double kBm25K1 = 1.2, kBm25B = 0.75;

bool IsLower(unsigned char c) { return c >= 'a' && c <= 'z'; }
bool IsUpper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
bool IsWordByte(unsigned char c) {
  return IsLower(c) || IsUpper(c) || (c >= '0' && c <= '9') || c >= 0x80;
}

// Best first, equal scores in declaration order.
std::vector<ToolScore> SortedBestFirst(std::vector<ToolScore> scores) {
  std::stable_sort(scores.begin(), scores.end(),
                   [](const ToolScore& a, const ToolScore& b) { return a.score > b.score; });
  return scores;
}

// One forward keeping the hidden states, then both probe heads on them.
absl::StatusOr<ProbeOutputs> RunProbeHeads(const Model& model, std::string_view forward_path,
                                           std::span<const int32_t> tokens, int32_t pad_id) {
  if (tokens.empty()) return absl::InvalidArgumentError("probe heads: no tokens");
  ForwardOptions options;
  options.keep_hidden = true;
  auto forward = MakeForwardPath(model, forward_path, options);
  if (!forward.ok()) return forward.status();
  if (absl::Status s = (*forward)->Feed(tokens, nullptr, false); !s.ok()) return s;
  return ComputeProbeHeads(model, tokens, (*forward)->hidden_by_position(), pad_id,
                           HiddenLayout::kByPosition);
}

}  // namespace

std::vector<std::string> RetrievalTerms(std::string_view text) {
  std::vector<std::string> terms;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) terms.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if (!IsWordByte(c)) {
      flush();
      continue;
    }
    if (IsUpper(c) && i > 0) {
      const unsigned char prev = text[i - 1];
      const bool next_lower = i + 1 < text.size() && IsLower(text[i + 1]);
      if (IsLower(prev) || (IsUpper(prev) && next_lower)) flush();
    }
    word.push_back(IsUpper(c) ? char(c - 'A' + 'a') : char(c));
  }
  flush();
  return terms;
}

std::vector<ToolScore> RankToolsBm25(std::string_view query, std::span<const ToolText> tools) {
  const size_t N = tools.size();
  std::vector<std::map<std::string, int>> tf(N);
  std::vector<double> length(N);
  std::map<std::string, int> df;
  double total_length = 0;
  for (size_t i = 0; i < N; ++i) {
    std::vector<std::string> terms = RetrievalTerms(tools[i].name);
    for (std::string& t : RetrievalTerms(tools[i].description)) terms.push_back(std::move(t));
    for (const std::string& t : terms)
      if (tf[i][t]++ == 0) ++df[t];
    length[i] = double(terms.size());
    total_length += length[i];
  }
  const double avg_length = N ? total_length / double(N) : 0;

  const std::vector<std::string> query_terms = RetrievalTerms(query);
  std::vector<ToolScore> scores(N);
  for (size_t i = 0; i < N; ++i) {
    scores[i].tool = i;
    if (avg_length == 0) continue;  // every tool is empty: nothing can match
    for (const std::string& q : query_terms) {
      auto it = tf[i].find(q);
      if (it == tf[i].end()) continue;
      const double n = df[q], f = it->second;
      const double idf = std::log(1.0 + (double(N) - n + 0.5) / (n + 0.5));
      scores[i].score +=
          idf * f * (kBm25K1 + 1) / (f + kBm25K1 * (1 - kBm25B + kBm25B * length[i] / avg_length));
    }
  }
  return SortedBestFirst(std::move(scores));
}

absl::StatusOr<std::vector<ToolScore>> RankToolsByEmbedding(
    std::span<const float> query, std::span<const std::vector<float>> tools) {
  std::vector<ToolScore> scores(tools.size());
  for (size_t i = 0; i < tools.size(); ++i) {
    if (tools[i].size() != query.size())
      return absl::InvalidArgumentError(absl::StrFormat(
          "tool %d embedding has %d values, the query's has %d", i, tools[i].size(), query.size()));
    scores[i].tool = i;
    for (size_t k = 0; k < query.size(); ++k) scores[i].score += double(query[k]) * tools[i][k];
  }
  return SortedBestFirst(std::move(scores));
}

absl::StatusOr<std::vector<float>> ContrastiveEmbedding(const Model& model,
                                                        std::string_view forward_path,
                                                        std::span<const int32_t> tokens,
                                                        int32_t pad_id) {
  if (!model.FindProbeHead(ProbeHead::kContrastive))
    return absl::NotFoundError(model.path() +
                               " has no contrastive (retrieval) probe head: rank tools with BM25");
  auto out = RunProbeHeads(model, forward_path, tokens, pad_id);
  if (!out.ok()) return out.status();
  return std::move(out->retrieval);
}

absl::StatusOr<CallConfidence> ScoreCallConfidence(const Model& model,
                                                   std::string_view forward_path,
                                                   std::span<const int32_t> prompt_and_call,
                                                   int32_t pad_id) {
  if (!model.FindProbeHead(ProbeHead::kConfidence))
    return absl::NotFoundError(model.path() + " has no confidence probe head");
  auto out = RunProbeHeads(model, forward_path, prompt_and_call, pad_id);
  if (!out.ok()) return out.status();
  CallConfidence c;
  c.logit = out->confidence;
  c.probability = 1.0 / (1.0 + std::exp(-double(c.logit)));
  return c;
}

const char* ToolDropName(ToolDrop drop) {
  switch (drop) {
    case ToolDrop::kRank:
      return "rank";
    case ToolDrop::kContext:
      return "context";
    case ToolDrop::kKept:
      break;
  }
  return "";
}

absl::StatusOr<ToolSelection> SelectTools(std::span<const ToolScore> ranking,
                                          std::span<const size_t> per_tool_token_cost, size_t top_k,
                                          size_t token_budget) {
  const size_t N = per_tool_token_cost.size();
  if (ranking.size() != N)
    return absl::InvalidArgumentError(absl::StrFormat(
        "tool selection: the ranking has %d entries for %d tools", ranking.size(), N));
  ToolSelection sel;
  sel.tools.resize(N);
  std::vector<bool> seen(N, false);
  size_t used = 0;
  for (size_t r = 0; r < N; ++r) {
    const size_t t = ranking[r].tool;
    if (t >= N || seen[t])
      return absl::InvalidArgumentError(absl::StrFormat(
          "tool selection: ranking entry %d names tool %d twice or out of range", r, t));
    seen[t] = true;
    ToolSelectionEntry& e = sel.tools[t];
    e.score = ranking[r].score;
    e.rank = r + 1;
    const size_t cost = per_tool_token_cost[t];
    if (sel.kept.size() >= top_k) {
      e.drop = ToolDrop::kRank;
    } else if (cost > token_budget - used) {
      e.drop = ToolDrop::kContext;
    } else {
      e.kept = true;
      used += cost;
      sel.kept.push_back(t);
    }
  }
  std::sort(sel.kept.begin(), sel.kept.end());
  return sel;
}

}  // namespace cact
