// Measures a corpus (not a test, not a CLI: the numbers behind docs and reports).
//   cact_corpus_stats TOKENIZER.model THREADS [OUT_DIR] -- ROOT...
// Prints discovery counts, bytes, the held-out share, token counts, the tokenizing time and
// the unigram baseline; with OUT_DIR, writes corpus.tsv and heldout.txt there.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "formats/sentencepiece_model.h"
#include "train/corpus.h"
#include "train/corpus_manifest.h"
#include "train/corpus_tokens.h"

using namespace cact;
using namespace cact::train;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc), roots;
  size_t sep = 0;
  while (sep < args.size() && args[sep] != "--") ++sep;
  if (sep < 2 || sep + 1 >= args.size()) {
    std::fprintf(stderr, "usage: cact_corpus_stats TOKENIZER.model THREADS [OUT_DIR] -- ROOT...\n");
    return 2;
  }
  roots.assign(args.begin() + long(sep) + 1, args.end());
  auto blob = ReadSentencePieceModel(args[0]);
  if (!blob.ok()) return std::fprintf(stderr, "%s\n", blob.status().ToString().c_str()), 1;
  auto tok = Tokenizer::FromBlob(std::move(*blob));
  if (!tok.ok()) return std::fprintf(stderr, "%s\n", tok.status().ToString().c_str()), 1;
  const int threads = std::stoi(args[1]);

  DiscoveryStats st;
  const auto t0 = std::chrono::steady_clock::now();
  auto docs = CollectDocuments(roots, CorpusFilter(), &st);
  if (!docs.ok()) return std::fprintf(stderr, "%s\n", docs.status().ToString().c_str()), 1;
  const auto t1 = std::chrono::steady_clock::now();
  size_t held_docs = 0;
  uint64_t held_bytes = 0;
  for (const Document& d : *docs)
    if (d.split == Split::kHeldOut) ++held_docs, held_bytes += d.text.size();
  std::printf(
      "candidates %zu kept %zu | excluded %zu symlinks %zu unreadable %zu compressed %zu too_large "
      "%zu "
      "binary %zu not_utf8 %zu empty %zu duplicates %zu\n",
      st.candidates, st.kept, st.excluded, st.symlinks, st.unreadable, st.compressed, st.too_large,
      st.binary, st.not_utf8, st.empty, st.duplicates);
  std::printf(
      "file bytes %llu, normalised text bytes %llu; held out %zu docs (%.2f %%), %llu text "
      "bytes (%.2f %%); discovery %.2f s\n",
      (unsigned long long)st.kept_file_bytes, (unsigned long long)st.kept_text_bytes, held_docs,
      100.0 * double(held_docs) / double(st.kept), (unsigned long long)held_bytes,
      100.0 * double(held_bytes) / double(st.kept_text_bytes),
      std::chrono::duration<double>(t1 - t0).count());

  // CPU time beside wall time: on a shared machine the wall time says little.
  const std::clock_t c2 = std::clock();
  const auto t2 = std::chrono::steady_clock::now();
  const TokenStreams s = TokenizeDocuments(*tok, *docs, threads);
  const auto t3 = std::chrono::steady_clock::now();
  const double cpu = double(std::clock() - c2) / CLOCKS_PER_SEC;
  const std::string held_text = SplitText(*docs, Split::kHeldOut);
  const std::vector<int32_t> scored = tok->Encode(held_text);
  auto ppl = UnigramPerplexity(s.train, scored, tok->vocab_size());
  std::printf(
      "tokens: train %zu (%zu docs), heldout %zu (%zu docs), heldout text as cact-run "
      "scores it %zu; tokenizing %.2f s wall with %d threads, %.2f s CPU (%.2f MB/s of CPU)\n",
      s.train.size(), s.train_docs, s.heldout.size(), s.heldout_docs, scored.size(),
      std::chrono::duration<double>(t3 - t2).count(), threads, cpu,
      double(st.kept_text_bytes) / 1e6 / cpu);
  std::printf("unigram perplexity (add-one, vocab %d) of the held-out text: %.4f\n",
              tok->vocab_size(), ppl.ok() ? *ppl : -1.0);
  if (sep == 3) {
    const std::string out = args[2];
    auto w = WriteManifest(out + "/corpus.tsv", ManifestOf(*docs));
    if (w.ok()) w = WriteTextFile(out + "/heldout.txt", *docs, Split::kHeldOut);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.ToString().c_str()), 1;
    auto again = LoadCorpusFromManifest(out + "/corpus.tsv");
    std::printf("manifest reloaded and verified: %s\n", again.ok()
                                                            ? std::to_string(again->size()).c_str()
                                                            : again.status().ToString().c_str());
  }
  return 0;
}
