// What `cact-torch train` trains on: the tokenizer, a training token stream and a held-out
// one, from the user's files or the corpus, plus the unigram baseline of the held-out text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/tokenizer_blob.h"

namespace cact::train {

struct TrainingDataOptions {
  std::string tokenizer_path;         // a SentencePiece .model; empty = built-in 512-piece one
  std::vector<std::string> text;      // training text files
  std::vector<std::string> heldout;   // held-out text files (scored as one concatenated text)
};

struct TrainingData {
  TokenizerBlob tokenizer_blob;
  std::string tokenizer_source;
  int32_t bos_id = 2;
  std::vector<int32_t> train;    // documents encoded without BOS, EOS between documents
  std::vector<int32_t> heldout;  // Encode(concatenated held-out text), as cact-run scores it
  double unigram_loss = NAN;     // held-out NLL of an add-one unigram model of `train`
  std::string description;       // for the weights' metadata
};

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& o, const Geometry& g);

}  // namespace cact::train
