#include "train/training_data.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/tokenizer.h"
#include "formats/sentencepiece_model.h"
#include "lib/file_bytes.h"
#include "quant/synthetic.h"

namespace cact::train {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  auto bytes = FileBytes::Open(path);
  if (!bytes.ok()) return bytes.status();
  return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

double UnigramLoss(const std::vector<int32_t>& train, const std::vector<int32_t>& heldout,
                   size_t vocab) {
  std::vector<double> counts(vocab, 1.0);  // add-one
  for (int32_t t : train) counts[size_t(t)] += 1;
  const double total = double(train.size()) + double(vocab);
  double nll = 0;
  for (int32_t t : heldout) nll -= std::log(counts[size_t(t)] / total);
  return heldout.empty() ? NAN : nll / double(heldout.size());
}

// Encodes a long text in pieces cut after a newline near every 8 KiB: the BPE works on one
// piece at a time (its working set stays in cache; one 15 MB string takes minutes), and a
// cut changes only the first word of a piece (the dummy prefix), once per ~3,000 tokens.
void AppendEncoded(const Tokenizer& tok, std::string_view text, std::vector<int32_t>* out) {
  constexpr size_t kPiece = 8192;
  while (!text.empty()) {
    size_t cut = text.size();
    if (cut > kPiece) {
      const size_t nl = text.find('\n', kPiece);
      cut = nl == std::string_view::npos ? text.size() : nl + 1;
    }
    std::vector<int32_t> ids = tok.Encode(text.substr(0, cut));
    out->insert(out->end(), ids.begin(), ids.end());
    text.remove_prefix(cut);
  }
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& o, const Geometry& g) {
  TrainingData d;
  if (o.tokenizer_path.empty()) {
    auto preset = FindSyntheticPreset("small");
    auto blob = SyntheticTokenizer(*preset);
    if (!blob.ok()) return blob.status();
    d.tokenizer_blob = *blob;
    d.tokenizer_source = "small_tokenizer.model (built in, 512 pieces)";
  } else {
    auto bytes = FileBytes::Open(o.tokenizer_path);
    if (!bytes.ok()) return bytes.status();
    auto blob = ParseSentencePieceModel(bytes->span(), o.tokenizer_path);
    if (!blob.ok()) return blob.status();
    d.tokenizer_blob = *blob;
    d.tokenizer_source = o.tokenizer_path;
  }
  auto tok = Tokenizer::FromBlob(d.tokenizer_blob);
  if (!tok.ok()) return tok.status();
  if (uint32_t(tok->vocab_size()) != g.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", d.tokenizer_source, " has ",
                                                   tok->vocab_size(), " pieces; the geometry's vocab is ",
                                                   g.vocab));
  }
  d.bos_id = tok->bos_id();
  if (o.text.empty()) return absl::InvalidArgumentError("no training text given");
  for (const std::string& path : o.text) {
    auto text = ReadText(path);
    if (!text.ok()) return text.status();
    AppendEncoded(*tok, *text, &d.train);
    d.train.push_back(tok->eos_id());
  }
  std::string heldout;
  for (const std::string& path : o.heldout) {
    auto text = ReadText(path);
    if (!text.ok()) return text.status();
    heldout += *text;
  }
  d.heldout = tok->Encode(heldout);
  d.unigram_loss = UnigramLoss(d.train, d.heldout, g.vocab);
  d.description = absl::StrCat("text: ", absl::StrJoin(o.text, " "),
                               "; held out: ", absl::StrJoin(o.heldout, " "));
  return d;
}

}  // namespace cact::train
