// What `cact-torch train` trains on: the tokenizer, a training token stream and a held-out
// one, from a corpus (directories walked and split by content hash, or a checked manifest)
// or from the user's own text files, plus the unigram baseline on the scored tokens.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/tokenizer.h"
#include "formats/cact/header.h"
#include "formats/tokenizer_blob.h"
#include "train/corpus.h"

namespace cact::train {

struct TrainingDataOptions {
  std::string tokenizer_path;        // a SentencePiece .model; empty = built-in 512-piece one
  std::vector<std::string> corpus;   // roots: files and directories (train/corpus.h rules)
  std::string manifest;              // or a manifest: every file checked by size and SHA-256
  std::vector<std::string> text;     // or plain training text files...
  std::vector<std::string> heldout;  // ...and held-out text files (scored as one text)
  int64_t ctx = 256;                 // scoring chunks: ctx-1 tokens each (cact-run --ctx)
  int64_t heldout_chunks = 128;      // chunks scored (cact-run --chunks; 0 = all)
  Spacing spacing = Spacing::kKeep;  // the corpus's or manifest's normalisation (train/corpus.h)
};

struct TrainingData {
  TokenizerBlob tokenizer_blob;
  std::string tokenizer_source;
  int32_t bos_id = 2;
  std::vector<int32_t> train;       // documents encoded without BOS, EOS after each
  std::string heldout_text;         // the held-out documents as one text (what cact-run scores)
  std::vector<int32_t> heldout;     // the scored tokens: Encode(heldout_text), first chunks only
  std::vector<Document> documents;  // the corpus (empty for --text); texts released
  double unigram_loss = NAN;        // add-one unigram of `train`, mean NLL over `heldout`
  std::string description;          // for the weights' metadata
};

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& o, const Geometry& g);

struct TrainingTokenizer {
  TokenizerBlob blob;
  std::string source;
};
// A SentencePiece .model, or the built-in 512-piece Debian tokenizer for an empty path.
absl::StatusOr<TrainingTokenizer> LoadTrainingTokenizer(const std::string& path);

// Per piece id, the id its text has without a word start: "\u2581doxy" -> "doxy" where the
// vocabulary has that piece, else the piece's own id. A value copied from a sentence into a
// JSON string loses its word start, so a copy head matches runs of these.
std::vector<int64_t> WithoutWordStart(const TokenizerBlob& blob);

// The tokens `cact-run perplexity -f TEXT --ctx ctx --chunks max_chunks` scores: Encode(text)
// cut to its first max_chunks chunks of ctx-1 tokens (0 = all).
std::vector<int32_t> ScoredTokens(const Tokenizer& tok, std::string_view text, int64_t ctx,
                                  int64_t max_chunks);

}  // namespace cact::train
