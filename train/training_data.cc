#include "train/training_data.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/eval/perplexity.h"
#include "engine/text/tokenizer.h"
#include "formats/sentencepiece_model.h"
#include "lib/file_bytes.h"
#include "quant/synthetic.h"
#include "train/corpus_manifest.h"
#include "train/corpus_tokens.h"

namespace cact::train {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  auto bytes = FileBytes::Open(path);
  if (!bytes.ok()) return bytes.status();
  return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
}

// Plain files: each training file is a document; the held-out files are one text.
absl::Status LoadTextFiles(const TrainingDataOptions& o, std::vector<Document>* docs,
                           std::string* heldout) {
  for (const std::string& path : o.text) {
    auto text = ReadText(path);
    if (!text.ok()) return text.status();
    Document doc;
    doc.path = path;
    doc.split = Split::kTrain;
    doc.text = std::move(*text);
    docs->push_back(std::move(doc));
  }
  for (const std::string& path : o.heldout) {
    auto text = ReadText(path);
    if (!text.ok()) return text.status();
    *heldout += *text;
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> WithoutWordStart(const TokenizerBlob& blob) {
  constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581
  absl::flat_hash_map<std::string_view, int64_t> ids;
  for (size_t i = 0; i < blob.pieces.size(); ++i)
    if (blob.pieces[i].type == PieceType::kNormal)
      ids.try_emplace(blob.pieces[i].surface, int64_t(i));
  std::vector<int64_t> out(blob.pieces.size());
  for (size_t i = 0; i < blob.pieces.size(); ++i) {
    const std::string_view s = blob.pieces[i].surface;
    out[i] = int64_t(i);
    if (blob.pieces[i].type != PieceType::kNormal || !s.starts_with(kWordStart)) continue;
    if (auto it = ids.find(s.substr(kWordStart.size())); it != ids.end()) out[i] = it->second;
  }
  return out;
}

absl::StatusOr<TrainingTokenizer> LoadTrainingTokenizer(const std::string& path) {
  TrainingTokenizer t;
  if (path.empty()) {
    auto blob = SyntheticTokenizer(*FindSyntheticPreset("small"));
    if (!blob.ok()) return blob.status();
    t.blob = *blob;
    t.source = "small_tokenizer.model (built in, 512 pieces)";
    return t;
  }
  auto bytes = FileBytes::Open(path);
  if (!bytes.ok()) return bytes.status();
  auto blob = ParseSentencePieceModel(bytes->span(), path);
  if (!blob.ok()) return blob.status();
  t.blob = *blob;
  t.source = path;
  return t;
}

std::vector<int32_t> ScoredTokens(const Tokenizer& tok, std::string_view text, int64_t ctx,
                                  int64_t max_chunks) {
  std::vector<int32_t> all = tok.Encode(text);
  std::vector<TextChunk> chunks = SplitIntoChunks(all.size(), uint32_t(ctx));
  if (max_chunks > 0 && int64_t(chunks.size()) > max_chunks) chunks.resize(size_t(max_chunks));
  if (chunks.empty()) return {};
  all.resize(chunks.back().begin + chunks.back().size);
  return all;
}

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& o, const Geometry& g) {
  const int sources = int(!o.corpus.empty()) + int(!o.manifest.empty()) + int(!o.text.empty());
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one corpus: --corpus PATHS, --manifest FILE or --text FILES");
  }
  if (o.spacing != Spacing::kKeep && !o.text.empty())
    return absl::InvalidArgumentError(
        "--collapse-spaces goes with --corpus or --manifest (text files are taken as they are)");
  if (!o.heldout.empty() && o.text.empty())
    return absl::InvalidArgumentError("--heldout goes with --text (a corpus holds out its own)");
  TrainingData d;
  auto tokenizer = LoadTrainingTokenizer(o.tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  d.tokenizer_blob = std::move(tokenizer->blob);
  d.tokenizer_source = std::move(tokenizer->source);
  auto tok = Tokenizer::FromBlob(d.tokenizer_blob);
  if (!tok.ok()) return tok.status();
  if (uint32_t(tok->vocab_size()) != g.vocab) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", d.tokenizer_source, " has ",
                                                   tok->vocab_size(),
                                                   " pieces; the geometry's vocab is ", g.vocab));
  }
  d.bos_id = tok->bos_id();

  std::vector<Document> docs;
  if (!o.text.empty()) {
    if (absl::Status s = LoadTextFiles(o, &docs, &d.heldout_text); !s.ok()) return s;
    d.description = absl::StrCat("text: ", absl::StrJoin(o.text, " "),
                                 "; held out: ", absl::StrJoin(o.heldout, " "));
  } else {
    CorpusFilter filter;
    filter.spacing = o.spacing;
    absl::StatusOr<std::vector<Document>> loaded =
        o.manifest.empty() ? CollectDocuments(o.corpus, filter)
                           : LoadCorpusFromManifest(o.manifest, o.spacing);
    if (!loaded.ok()) return loaded.status();
    docs = std::move(*loaded);
    d.heldout_text = SplitText(docs, Split::kHeldOut);
    d.description = o.manifest.empty() ? absl::StrCat("corpus: ", absl::StrJoin(o.corpus, " "))
                                       : absl::StrCat("manifest: ", o.manifest);
    if (o.spacing == Spacing::kCollapse) d.description += "; spaces collapsed";
  }
  TokenStreams streams = TokenizeDocuments(*tok, docs);
  d.train = std::move(streams.train);
  if (d.train.empty()) return absl::InvalidArgumentError("the corpus has no training text");
  d.heldout = ScoredTokens(*tok, d.heldout_text, o.ctx, o.heldout_chunks);
  if (!d.heldout.empty()) {
    auto ppl = UnigramPerplexity(d.train, d.heldout, int32_t(g.vocab));
    if (!ppl.ok()) return ppl.status();
    d.unigram_loss = std::log(*ppl);
  }
  for (Document& doc : docs) std::string().swap(doc.text);
  d.documents = std::move(docs);
  return d;
}

}  // namespace cact::train
