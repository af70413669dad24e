#include "train/corpus_tokens.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace cact::train {
namespace {

absl::StatusOr<std::vector<uint64_t>> Counts(std::span<const int32_t> ids, int32_t vocab,
                                             const char* what) {
  std::vector<uint64_t> counts(size_t(vocab), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab)
      return absl::InvalidArgumentError(absl::StrFormat(
          "unigram: %s token %d is id %d, outside the vocabulary [0, %d)", what, i, ids[i], vocab));
    ++counts[size_t(ids[i])];
  }
  return counts;
}

}  // namespace

TokenStreams TokenizeDocuments(const Tokenizer& tok, std::span<const Document> docs, int threads) {
  std::vector<std::vector<int32_t>> ids(docs.size());
  const int n = int(docs.size());
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (int i = 0; i < n; ++i) ids[size_t(i)] = tok.Encode(docs[size_t(i)].text);
  TokenStreams out;
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool held = docs[i].split == Split::kHeldOut;
    std::vector<int32_t>& stream = held ? out.heldout : out.train;
    ++(held ? out.heldout_docs : out.train_docs);
    stream.insert(stream.end(), ids[i].begin(), ids[i].end());
    stream.push_back(tok.eos_id());
  }
  return out;
}

absl::StatusOr<double> UnigramPerplexity(std::span<const int32_t> train,
                                         std::span<const int32_t> heldout, int32_t vocab) {
  if (vocab <= 0) return absl::InvalidArgumentError("unigram: the vocabulary is empty");
  if (heldout.empty()) return absl::InvalidArgumentError("unigram: no held-out tokens");
  auto train_counts = Counts(train, vocab, "training");
  if (!train_counts.ok()) return train_counts.status();
  auto heldout_counts = Counts(heldout, vocab, "held-out");
  if (!heldout_counts.ok()) return heldout_counts.status();
  // Summed over the vocabulary, not the tokens: V terms instead of millions.
  double sum_log_numerator = 0;
  for (size_t v = 0; v < size_t(vocab); ++v)
    if ((*heldout_counts)[v] != 0)
      sum_log_numerator += double((*heldout_counts)[v]) * std::log(double((*train_counts)[v] + 1));
  const double log_denominator = std::log(double(train.size()) + double(vocab));
  return std::exp(log_denominator - sum_log_numerator / double(heldout.size()));
}

absl::StatusOr<double> UnigramPerplexityOfText(const Tokenizer& tok, std::span<const int32_t> train,
                                               std::string_view text) {
  const std::vector<int32_t> ids = tok.Encode(text);
  return UnigramPerplexity(train, ids, tok.vocab_size());
}

}  // namespace cact::train
