#include "engine/eval/perplexity.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "engine/forward_paths.h"
#include "engine/eval/logit_stats.h"
#include "engine/model.h"
#include "engine/text/tokenizer.h"
#include "lib/cpu_features.h"
#include "lib/resources.h"
#include "lib/status.h"

namespace cact {

std::vector<TextChunk> SplitIntoChunks(size_t num_tokens, uint32_t ctx) {
  std::vector<TextChunk> chunks;
  const size_t per_chunk = ctx > 1 ? ctx - 1 : 1;
  for (size_t b = 0; b < num_tokens; b += per_chunk)
    chunks.push_back({b, uint32_t(std::min(per_chunk, num_tokens - b))});
  return chunks;
}

std::string FormatPerplexity(double v) {
  return std::abs(v) < 1e6 ? absl::StrFormat("%.4f", v) : absl::StrFormat("%.4e", v);
}

double ChunkPerplexity::ppl() const { return tokens ? std::exp(nll_sum / tokens) : 0; }

Quantiles QuantilesOf(std::vector<double> v) {
  Quantiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&](double level) {
    const double pos = level * double(v.size() - 1);
    const size_t lo = size_t(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  q = {v.front(), at(0.01), at(0.05), at(0.10), at(0.5), at(0.90),
       at(0.95),  at(0.99), at(0.999), v.back()};
  return q;
}

namespace {

// Running sums of one per-token quantity.
struct Moments {
  double n = 0, sum = 0, sum_sq = 0;
  void Add(double x) {
    n += 1;
    sum += x;
    sum_sq += x * x;
  }
  MeanWithError Get() const {
    MeanWithError m;
    if (n == 0) return m;
    m.mean = sum / n;
    if (n > 1) m.error = std::sqrt(std::max(0.0, (sum_sq / n - m.mean * m.mean) / (n - 1)));
    return m;
  }
};

double Correlation(const std::vector<TokenComparison>& t) {
  if (t.size() < 2) return 0;
  double ma = 0, mb = 0;
  for (const auto& x : t) {
    ma += x.nll_base;
    mb += x.nll_other;
  }
  ma /= double(t.size());
  mb /= double(t.size());
  double sab = 0, saa = 0, sbb = 0;
  for (const auto& x : t) {
    const double a = x.nll_base - ma, b = x.nll_other - mb;
    sab += a * b;
    saa += a * a;
    sbb += b * b;
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

// The models of a run, their text's token ids and chunks.
struct ScoringInput {
  std::vector<std::unique_ptr<Model>> models;
  std::vector<int32_t> ids;
  int32_t bos = 0;
  std::vector<TextChunk> chunks;
  ScoringRun run;
};

absl::StatusOr<ScoringInput> PrepareScoring(const std::vector<std::string>& paths,
                                            std::string_view text, const ScoringOptions& o) {
  ScoringInput in;
  for (const std::string& p : paths) {
    CACT_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, Model::Open(p));
    in.models.push_back(std::move(m));
  }
  const Model& base = *in.models[0];
  for (size_t i = 1; i < in.models.size(); ++i) {
    const Model& other = *in.models[i];
    if (other.vocab() != base.vocab())
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has a vocabulary of %d tokens and %s of %d: compare needs the same tokenizer",
          base.path(), base.vocab(), other.path(), other.vocab()));
    const auto a = base.file().tokenizer_blob(), b = other.file().tokenizer_blob();
    if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) {
      const size_t at = size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                               a.begin());
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s and %s have different tokenizers (their tokenizer records differ from byte %d "
          "on): compare needs the same tokenizer",
          base.path(), other.path(), at));
    }
  }
  CACT_ASSIGN_OR_RETURN(Tokenizer tok,
                        Tokenizer::FromBytes(base.file().tokenizer_blob(), base.path()));
  in.ids = tok.Encode(text);
  in.bos = tok.bos_id();
  if (in.ids.empty()) return absl::InvalidArgumentError("the text has no tokens to score");

  const uint32_t ctx = o.ctx ? o.ctx : std::min(base.max_seq_len(), kDefaultScoringContext);
  for (const auto& m : in.models)
    if (ctx < 2 || ctx > m->max_seq_len())
      return absl::InvalidArgumentError(absl::StrFormat(
          "--ctx %d: a chunk needs 2 to max_seq_len (%d in %s) positions", ctx, m->max_seq_len(),
          m->path()));
  in.chunks = SplitIntoChunks(in.ids.size(), ctx);
  if (o.max_chunks && in.chunks.size() > o.max_chunks) in.chunks.resize(o.max_chunks);

  ScoringRun& r = in.run;
  r.ctx = ctx;
  r.window = o.window.value_or(base.kv_window());
  r.sink = o.sink;
  // Refused, never capped (the rule of every tool): a window or sink past the model.
  if (r.window > base.max_seq_len())
    return absl::InvalidArgumentError(absl::StrFormat(
        "--window %d is more than the model's max_seq_len %d", r.window, base.max_seq_len()));
  if (r.sink > ctx)
    return absl::InvalidArgumentError(
        absl::StrFormat("--sink %d is more than a chunk's %d positions (--ctx)", r.sink, ctx));
  const int threads = o.threads > 0 ? o.threads : std::min(AvailableCpus(), kMaxAutoThreads);
  r.workers = int(std::min<size_t>(size_t(threads), in.chunks.size()));
  r.threads_per_worker = std::max(1, threads / r.workers);
  r.text_bytes = text.size();
  r.text_tokens = in.ids.size();
  r.chunks = in.chunks.size();
  for (const TextChunk& c : in.chunks) r.tokens_scored += c.size;
  return in;
}

// Called on a worker's thread with the logits [n, vocab] of every model for one chunk.
using ChunkScorer = std::function<void(size_t chunk, const std::vector<std::vector<float>>& logits)>;

// Feeds every chunk to one forward per model and worker; `score` must only touch the
// chunk's own results. Progress is reported in completion order.
absl::Status RunChunks(ScoringInput& in, const ScoringOptions& o, const ChunkScorer& score,
                       const std::function<double(size_t chunk)>& chunk_nll,
                       const ProgressFn& progress) {
  ForwardOptions fo;
  fo.attn = {in.run.window, in.run.sink};
  fo.threads = in.run.threads_per_worker;
  std::atomic<size_t> next{0};
  std::mutex mu;
  absl::Status first_error;
  ScoringProgress state;
  state.chunks_total = in.chunks.size();
  Stopwatch clock;

  auto worker = [&]() {
    std::vector<std::unique_ptr<Forward>> fwd;
    for (size_t i = 0; i < in.models.size(); ++i) {
      const std::string& path = i > 0 && !o.other_path.empty() ? o.other_path : o.path;
      auto f = MakeForwardPath(*in.models[i], path, fo);
      if (!f.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = f.status();
        return;
      }
      fwd.push_back(std::move(f).value());
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      in.run.path_name = fwd[0]->name();
      if (fwd.size() > 1) in.run.other_path_name = fwd[1]->name();
    }
    std::vector<std::vector<float>> logits(fwd.size());
    std::vector<int32_t> feed;
    for (size_t c; (c = next.fetch_add(1)) < in.chunks.size();) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok()) return;
      }
      const TextChunk& chunk = in.chunks[c];
      feed.assign(1, in.bos);
      feed.insert(feed.end(), in.ids.begin() + ptrdiff_t(chunk.begin),
                  in.ids.begin() + ptrdiff_t(chunk.begin + chunk.size - 1));
      for (size_t m = 0; m < fwd.size(); ++m) {
        fwd[m]->Reset();
        if (auto st = fwd[m]->Feed(feed, &logits[m], true); !st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = st;
          return;
        }
      }
      score(c, logits);
      std::lock_guard<std::mutex> lock(mu);
      ++state.chunks_done;
      state.tokens_done += chunk.size;
      state.nll_sum += chunk_nll(c);
      state.seconds = clock.Seconds();
      if (progress) progress(state);
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < in.run.workers; ++w) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  in.run.seconds = clock.Seconds();
  return first_error;
}

}  // namespace

absl::StatusOr<PerplexityReport> ComputePerplexity(const std::string& model_path,
                                                   std::string_view text,
                                                   const ScoringOptions& options,
                                                   const ProgressFn& progress) {
  CACT_ASSIGN_OR_RETURN(ScoringInput in, PrepareScoring({model_path}, text, options));
  PerplexityReport r;
  r.model_path = model_path;
  r.chunks.resize(in.chunks.size());
  std::vector<Moments> moments(in.chunks.size());
  const uint32_t V = in.models[0]->vocab();
  auto score = [&](size_t c, const std::vector<std::vector<float>>& logits) {
    const TextChunk& chunk = in.chunks[c];
    std::vector<float> scratch;
    for (uint32_t i = 0; i < chunk.size; ++i) {
      const std::span<const float> row(logits[0].data() + size_t(i) * V, V);
      const LogitRow s = SummarizeLogits(row, scratch);
      moments[c].Add(-LogProb(row, s, uint32_t(in.ids[chunk.begin + i])));
    }
    r.chunks[c] = {chunk.begin, chunk.size, moments[c].sum};
  };
  CACT_RETURN_IF_ERROR(RunChunks(
      in, options, score, [&](size_t c) { return r.chunks[c].nll_sum; }, progress));
  Moments all;
  for (const Moments& m : moments) {
    all.n += m.n;
    all.sum += m.sum;
    all.sum_sq += m.sum_sq;
  }
  r.run = in.run;
  r.nll = all.Get();
  r.ppl = std::exp(r.nll.mean);
  r.ppl_stderr = r.ppl * r.nll.error;
  return r;
}

absl::StatusOr<CompareReport> CompareModels(const std::string& base_path,
                                            const std::string& other_path, std::string_view text,
                                            const ScoringOptions& options,
                                            const ProgressFn& progress) {
  CACT_ASSIGN_OR_RETURN(ScoringInput in, PrepareScoring({base_path, other_path}, text, options));
  CompareReport r;
  r.base_path = base_path;
  r.other_path = other_path;
  std::vector<std::vector<TokenComparison>> per_chunk(in.chunks.size());
  std::vector<double> chunk_nll(in.chunks.size());
  const uint32_t V = in.models[0]->vocab();
  auto score = [&](size_t c, const std::vector<std::vector<float>>& logits) {
    const TextChunk& chunk = in.chunks[c];
    std::vector<float> base_exp, other_exp;
    std::vector<TokenComparison>& out = per_chunk[c];
    out.resize(chunk.size);
    double nll = 0;
    for (uint32_t i = 0; i < chunk.size; ++i) {
      const std::span<const float> b(logits[0].data() + size_t(i) * V, V);
      const std::span<const float> o(logits[1].data() + size_t(i) * V, V);
      const LogitRow sb = SummarizeLogits(b, base_exp);
      const LogitRow so = SummarizeLogits(o, other_exp);
      const uint32_t target = uint32_t(in.ids[chunk.begin + i]);
      const double lb = LogProb(b, sb, target), lo = LogProb(o, so, target);
      TokenComparison& t = out[i];
      t.kld = KlDivergenceFromRows(b, sb, base_exp, o, so);
      t.nll_base = -lb;
      t.nll_other = -lo;
      t.p_base = std::exp(lb);
      t.p_other = std::exp(lo);
      t.same_top1 = sb.argmax == so.argmax;
      nll -= lb;
    }
    chunk_nll[c] = nll;
  };
  CACT_RETURN_IF_ERROR(
      RunChunks(in, options, score, [&](size_t c) { return chunk_nll[c]; }, progress));
  r.run = in.run;

  Moments nb, no, ratio, kld, dp, top1;
  std::vector<double> klds, dps;
  for (auto& chunk : per_chunk)
    for (const TokenComparison& t : chunk) {
      nb.Add(t.nll_base);
      no.Add(t.nll_other);
      ratio.Add(t.nll_other - t.nll_base);
      kld.Add(t.kld);
      klds.push_back(t.kld);
      const double d = t.p_other - t.p_base;
      dp.Add(d);
      dps.push_back(d);
      top1.Add(t.same_top1 ? 1 : 0);
      r.tokens.push_back(t);
    }
  r.nll_base = nb.Get();
  r.nll_other = no.Get();
  r.ln_ppl_ratio = ratio.Get();
  r.ppl_base = std::exp(r.nll_base.mean);
  r.ppl_other = std::exp(r.nll_other.mean);
  r.nll_correlation = Correlation(r.tokens);
  r.kld = kld.Get();
  r.kld_q = QuantilesOf(std::move(klds));
  r.delta_p = dp.Get();
  r.delta_p_rms = dp.n ? std::sqrt(dp.sum_sq / dp.n) : 0;
  r.delta_p_q = QuantilesOf(std::move(dps));
  r.top1_agreement = top1.Get();
  return r;
}

}  // namespace cact
