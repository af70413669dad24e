// Grammar-constrained token choice for one answer: masks the logits to the tokens that keep
// the answer valid, samples among them, and keeps the answer finishable within the token
// budget. The budget rule: a token is taken only if the shortest completion after it still
// fits in what is left; when nothing else fits, the decoder writes that completion (closing
// moves only). The think block has its own budget, after which "</think>\n<tool_call>" is
// forced. So the answer is complete and valid within `max_tokens`, whatever the model does.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampler.h"
#include "engine/toolcall/token_mask.h"
#include "engine/toolcall/tool_call_grammar.h"

namespace cact {

struct ToolCallDecodeOptions {
  uint32_t max_tokens = 256;  // the whole answer, <|im_end|> included
  uint32_t think_max = 64;    // tokens of free think text
  SamplerOptions sampling;
};

struct ToolCallDecodeStats {
  double mask_ms = 0;  // computing masks and completions
  uint32_t masked_steps = 0;
  uint32_t forced_tokens = 0;  // written by the budget rules, not chosen by the model
  uint32_t only_choices = 0;   // masked steps where the grammar allowed one token
};

class ToolCallDecoder {
 public:
  // InvalidArgument when even the shortest answer does not fit in max_tokens.
  static absl::StatusOr<ToolCallDecoder> Create(const ToolCallGrammar& grammar,
                                                const VocabularyTrie& trie,
                                                const ToolCallDecodeOptions& options);

  // The next token given the model's logits for it ([vocab]), or -1 once the answer is
  // complete. The token is already accepted: feed it to the model and call again.
  int32_t Next(std::span<const float> logits);
  // The next token when it does not depend on the logits: a planned token, the closing
  // written when nothing else fits, or the only token the grammar allows (drawn through the
  // sampler all the same, so a seeded run stays the same run). -1 once the answer is
  // complete; nullopt when the model must choose (then call Next with its logits). A caller
  // can feed such tokens to the model together, as one short prefill.
  std::optional<int32_t> NextWithoutLogits();
  bool done() const { return state_.Done(); }
  // The answer's bytes so far (with the tokenizer's leading dummy space, if written).
  const std::string& bytes() const { return bytes_; }
  const ToolCallDecodeStats& stats() const { return stats_; }

 private:
  ToolCallDecoder(const ToolCallGrammar& grammar, const VocabularyTrie& trie,
                  const ToolCallDecodeOptions& options);
  // Tokens for the shortest completion from `s` (empty if it cannot be written).
  std::vector<int32_t> Completion(const GrammarState& s) const;
  void Accept(int32_t token);
  int32_t Force(std::vector<int32_t> plan);  // follow `plan`: its first token now
  int32_t NextPlanned();
  // Samples among candidates_ (logits empty: the one candidate), redrawing while a choice
  // could not be finished in the budget.
  int32_t Choose(std::span<const float> logits);

  const VocabularyTrie* trie_;
  TokenMasker masker_;
  ToolCallDecodeOptions options_;
  Sampler sampler_;
  GrammarState state_;
  std::string bytes_;
  std::vector<int32_t> plan_;  // forced tokens still to write
  std::vector<int32_t> closing_;  // the shortest completion from the state being decided
  bool choice_pending_ = false;   // candidates_ and closing_ await the model's logits
  size_t plan_pos_ = 0;
  uint32_t emitted_ = 0, think_tokens_ = 0;
  ToolCallDecodeStats stats_;
  std::vector<uint8_t> allowed_;
  std::vector<int32_t> candidates_;
  std::vector<float> candidate_logits_;
};

}  // namespace cact
