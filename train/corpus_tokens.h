// The corpus as token ids for the trainer, and the unigram baseline a trained model must beat.
//
// Training format: each document encoded on its own (Tokenizer::Encode: dummy prefix, no
// BOS) and followed by the EOS id, so the model learns where a document ends and a window
// that crosses a boundary sees it. One stream per split, documents in corpus order.
//
// Scoring format: `cact-run perplexity MODEL -f heldout.txt` (engine/eval/perplexity.h) encodes
// the whole held-out text file (SplitText) in one Encode call, without BOS or EOS, and
// scores every token. Those ids differ slightly from the held-out training-format stream
// (no EOS; a document after the first starts without the dummy-prefix space), so the
// baseline comparable with cact-run is UnigramPerplexityOfText on that text.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/tokenizer.h"
#include "train/corpus.h"

namespace cact::train {

struct TokenStreams {
  std::vector<int32_t> train, heldout;
  size_t train_docs = 0, heldout_docs = 0;
};

// Documents are encoded in parallel (OpenMP, `threads` <= 0: the runtime's default) into
// their own vectors and joined in order, so the streams do not depend on the thread count.
TokenStreams TokenizeDocuments(const Tokenizer& tok, std::span<const Document> docs,
                               int threads = 0);

// exp(mean over `heldout` of -ln p(t)) with p(t) = (count of t in `train` + 1) / (|train| +
// vocab): add-one smoothing over the full vocabulary. Fails on an id outside [0, vocab) or
// an empty `heldout`.
absl::StatusOr<double> UnigramPerplexity(std::span<const int32_t> train,
                                         std::span<const int32_t> heldout, int32_t vocab);
// The same over Encode(text): the tokens cact-run perplexity scores for that text.
absl::StatusOr<double> UnigramPerplexityOfText(const Tokenizer& tok, std::span<const int32_t> train,
                                               std::string_view text);

}  // namespace cact::train
