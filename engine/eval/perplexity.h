// Scoring text with a model, llama-perplexity style: `perplexity` (how well one model
// predicts a text) and `compare` (how far a second model's predictions moved from a base
// model's on the same text: KL divergence, top-1 agreement, change in the correct token's
// probability, both perplexities).
//
// The text is tokenized without BOS and cut into consecutive chunks of at most ctx - 1
// tokens. A chunk t_0..t_{n-1} is fed as BOS, t_0, ..., t_{n-2}: the logits at BOS predict
// t_0 and those at t_{i-1} predict t_i, so a chunk of n tokens gives n predictions, each
// from its own chunk's prefix only. Chunks are independent: they run in parallel, one
// forward per worker (a forward of several threads when there are fewer chunks than threads).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

inline constexpr uint32_t kDefaultScoringContext = 512;

struct ScoringOptions {
  std::string path = "auto";  // forward path, as MakeForwardPath takes it
  std::string other_path;     // compare: OTHER's path ("": the same as `path`)
  uint32_t ctx = 0;           // positions per chunk, BOS included; 0: min(max_seq_len, 512)
  int threads = 0;            // 0: the CPUs this process may use (at most kMaxAutoThreads)
  std::optional<uint32_t> window;  // attention window; default: the header's kv_window
  uint32_t sink = 0;
  size_t max_chunks = 0;  // score only the first N chunks (0 = all)
};

// Half-open range [begin, begin + size) of the text's token ids.
struct TextChunk {
  size_t begin = 0;
  uint32_t size = 0;
};
// Consecutive chunks of at most ctx - 1 tokens (ctx >= 2); the last may be shorter.
std::vector<TextChunk> SplitIntoChunks(size_t num_tokens, uint32_t ctx);

// Where a scoring run stands, for a progress line: chunks done, tokens scored, and the
// running negative log-likelihood sum of the base model.
struct ScoringProgress {
  size_t chunks_done = 0, chunks_total = 0, tokens_done = 0;
  double nll_sum = 0, seconds = 0;
};
using ProgressFn = std::function<void(const ScoringProgress&)>;

// What every report says about the run.
struct ScoringRun {
  std::string path_name;        // "fast", "fast-int8", "reference"
  std::string other_path_name;  // compare: OTHER's path
  uint32_t ctx = 0, window = 0, sink = 0;
  int workers = 1, threads_per_worker = 1;
  size_t text_bytes = 0, text_tokens = 0, chunks = 0, tokens_scored = 0;
  double seconds = 0;  // forwards and scoring, tokenization excluded
  double tokens_per_s() const { return seconds > 0 ? tokens_scored / seconds : 0; }
};

// Mean of per-token values with its standard error (sample sd / sqrt(n)).
struct MeanWithError {
  double mean = 0, error = 0;
};

struct ChunkPerplexity {
  size_t begin = 0;  // first token of the chunk in the text
  uint32_t tokens = 0;
  double nll_sum = 0;
  double ppl() const;
};

struct PerplexityReport {
  std::string model_path;
  ScoringRun run;
  std::vector<ChunkPerplexity> chunks;
  MeanWithError nll;  // nats per token
  double ppl = 0, ppl_stderr = 0;  // exp(mean NLL) and its first-order error ppl * se(NLL)
  std::string ToText() const;
  std::string ToJson() const;
};

absl::StatusOr<PerplexityReport> ComputePerplexity(const std::string& model_path,
                                                   std::string_view text,
                                                   const ScoringOptions& options,
                                                   const ProgressFn& progress = {});

// One scored position of a compare run.
struct TokenComparison {
  double kld = 0;  // KL(P_base || P_other), nats
  double nll_base = 0, nll_other = 0;
  double p_base = 0, p_other = 0;  // probability of the correct token
  bool same_top1 = false;
};

struct Quantiles {
  double min = 0, p01 = 0, p05 = 0, p10 = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0,
         max = 0;
};
// numpy.percentile's default (linear interpolation between closest ranks) at these levels.
Quantiles QuantilesOf(std::vector<double> values);

struct CompareReport {
  std::string base_path, other_path;
  ScoringRun run;
  std::vector<TokenComparison> tokens;  // in text order
  MeanWithError nll_base, nll_other, ln_ppl_ratio;  // ln_ppl_ratio: per token nll_other - nll_base
  double ppl_base = 0, ppl_other = 0, nll_correlation = 0;
  MeanWithError kld;
  Quantiles kld_q;
  MeanWithError delta_p;  // p_other - p_base of the correct token
  double delta_p_rms = 0;
  Quantiles delta_p_q;
  MeanWithError top1_agreement;  // a fraction
  std::string ToText() const;
  std::string ToJson() const;
};

// "%.4f", or "%.4e" from a million up (untrained models reach 1e17).
std::string FormatPerplexity(double ppl);

// Same chunks through both models. They must share the vocabulary and the tokenizer. With
// options.other_path, OTHER runs on that path (BASE = OTHER then compares two paths).
absl::StatusOr<CompareReport> CompareModels(const std::string& base_path,
                                            const std::string& other_path, std::string_view text,
                                            const ScoringOptions& options,
                                            const ProgressFn& progress = {});

}  // namespace cact
