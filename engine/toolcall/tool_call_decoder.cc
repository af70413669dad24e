#include "engine/toolcall/tool_call_decoder.h"

#include "absl/strings/str_format.h"
#include "lib/resources.h"

namespace cact {
namespace {

// Sampled tokens whose completion would not fit are masked and the choice is redrawn this
// many times before the decoder closes the answer itself.
constexpr int kBudgetRetries = 8;

}  // namespace

ToolCallDecoder::ToolCallDecoder(const ToolCallGrammar& grammar, const VocabularyTrie& trie,
                                 const ToolCallDecodeOptions& options)
    : trie_(&trie), masker_(trie), options_(options), sampler_(options.sampling), state_(grammar) {}

absl::StatusOr<ToolCallDecoder> ToolCallDecoder::Create(const ToolCallGrammar& grammar,
                                                        const VocabularyTrie& trie,
                                                        const ToolCallDecodeOptions& options) {
  ToolCallDecoder d(grammar, trie, options);
  const std::vector<int32_t> shortest = d.Completion(d.state_);
  if (shortest.empty())
    return absl::InvalidArgumentError(
        "the tokenizer cannot write a tool call (no tokens for the answer's markers)");
  if (shortest.size() > options.max_tokens)
    return absl::InvalidArgumentError(
        absl::StrFormat("-n %d is too small for a tool call: the shortest answer takes %d tokens",
                        options.max_tokens, shortest.size()));
  return d;
}

std::vector<int32_t> ToolCallDecoder::Completion(const GrammarState& s) const {
  return trie_->GreedyTokens(s.ShortestCompletion());
}

void ToolCallDecoder::Accept(int32_t token) {
  if (state_.InThink()) ++think_tokens_;
  state_.Feed(trie_->bytes(token));
  bytes_ += trie_->bytes(token);
  ++emitted_;
}

int32_t ToolCallDecoder::Force(std::vector<int32_t> plan) {
  if (plan.empty()) return -1;  // no tokens for the completion: Create refused such a vocabulary
  plan_ = std::move(plan);
  plan_pos_ = 0;
  return NextPlanned();
}

int32_t ToolCallDecoder::NextPlanned() {
  const int32_t t = plan_[plan_pos_++];
  ++stats_.forced_tokens;
  Accept(t);
  return t;
}

int32_t ToolCallDecoder::Next(std::span<const float> logits) {
  if (std::optional<int32_t> t = NextWithoutLogits()) return *t;
  return Choose(logits);
}

std::optional<int32_t> ToolCallDecoder::NextWithoutLogits() {
  if (choice_pending_) return std::nullopt;
  if (state_.Done() || emitted_ >= options_.max_tokens) return -1;
  if (plan_pos_ < plan_.size()) return NextPlanned();
  Stopwatch clock;
  const uint32_t remaining = options_.max_tokens - emitted_;
  // Out of think budget: end the block, then carry on choosing.
  if (state_.InThink() && think_tokens_ >= options_.think_max) {
    std::vector<int32_t> exit = trie_->GreedyTokens(state_.ThinkExit());
    GrammarState after = state_;
    after.Feed(state_.ThinkExit());
    if (!exit.empty() && exit.size() + Completion(after).size() <= remaining) {
      stats_.mask_ms += clock.Millis();
      return Force(std::move(exit));
    }
  }
  closing_ = Completion(state_);
  if (closing_.size() >= remaining) {
    stats_.mask_ms += clock.Millis();
    return Force(std::move(closing_));
  }

  masker_.Allowed(state_, &allowed_);
  candidates_.clear();
  for (int32_t t = 0; t < int32_t(allowed_.size()); ++t)
    if (allowed_[t]) candidates_.push_back(t);
  ++stats_.masked_steps;
  stats_.mask_ms += clock.Millis();
  choice_pending_ = true;
  if (candidates_.size() > 1) return std::nullopt;
  stats_.only_choices += candidates_.size();
  return Choose({});
}

int32_t ToolCallDecoder::Choose(std::span<const float> logits) {
  Stopwatch clock;
  choice_pending_ = false;
  const uint32_t remaining = options_.max_tokens - emitted_;
  for (int attempt = 0; attempt < kBudgetRetries && !candidates_.empty(); ++attempt) {
    candidate_logits_.clear();
    for (int32_t t : candidates_) candidate_logits_.push_back(logits.empty() ? 0.0f : logits[t]);
    const size_t pick = size_t(sampler_.Sample(candidate_logits_));
    const int32_t t = candidates_[pick];
    GrammarState after = state_;
    after.Feed(trie_->bytes(t));
    if (Completion(after).size() + 1 <= remaining) {
      stats_.mask_ms += clock.Millis();
      Accept(t);
      return t;
    }
    candidates_.erase(candidates_.begin() + long(pick));
  }
  stats_.mask_ms += clock.Millis();
  return Force(std::move(closing_));
}

}  // namespace cact
