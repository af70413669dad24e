// cact-torch eval: the perplexity of float weights (safetensors with the config metadata that
// cact-torch train writes) on a text, scored exactly as `cact-run perplexity --ctx --chunks`
// (same tokens, same chunks), optionally through CQ fake quantization at a scheme's widths.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "engine/eval/perplexity.h"
#include "engine/text/tokenizer.h"
#include "libtorch/blas_threads.h"
#include "formats/safetensors.h"
#include "lib/file_bytes.h"
#include "nlohmann/json.hpp"
#include "quant/weights_geometry.h"
#include "tools/cact-torch/commands.h"
#include "tools/common/cli.h"
#include "train/training_data.h"

namespace cact::torch_tool {

void EvalCommand::Add(CLI::App& app) {
  sub_ = app.add_subcommand("eval", "perplexity of float weights (FP32 libtorch) on a text");
  sub_->add_option("weights", weights_, "safetensors written by cact-torch train")->required();
  sub_->add_option("-f,--file", text_, "text to score")->required();
  sub_->add_option("--tokenizer", tokenizer_,
                   "SentencePiece .model (default: the built-in 512-piece one)");
  sub_->add_option("--ctx", ctx_,
                   "positions per chunk, BOS included, 2 to max_seq_len (as cact-run "
                   "perplexity)")
      ->check(tools::WholeIn(2, UINT32_MAX))
      ->default_str("min(max_seq_len, 512)");
  sub_->add_option("--chunks", chunks_, "score only the first N chunks (0 = all)")
      ->check(tools::WholeIn(0, UINT32_MAX));
  sub_->add_option("--fake-quant", fake_quant_,
                   "score through CQ fake quantization at this scheme");
  sub_->add_option("-t,--threads", threads_, "threads (default: the CPUs available)")
      ->check(tools::WholeIn(1, 256));
  sub_->add_flag("--json", json_, "print one JSON line");
  sub_->footer("Example:\n  cact-torch eval reference.safetensors -f heldout.txt --ctx 256");
}

int EvalCommand::Run() {
  auto st = ReadSafetensors(weights_);
  if (!st.ok()) return Fail(st.status());
  auto config = st->metadata.find("config");
  if (config == st->metadata.end())
    return Fail(absl::InvalidArgumentError(
        weights_ + ": no \"config\" metadata (not written by cact-torch train)"));
  uint32_t window = 0;
  if (auto w = st->metadata.find("kv_window_header"); w != st->metadata.end())
    window = uint32_t(std::stoul(w->second));
  auto g = GeometryFromOfficialConfig(config->second, window, weights_);
  if (!g.ok()) return Fail(g.status());
  auto weights = train::FromSafetensors(*st, *g, weights_);
  if (!weights.ok()) return Fail(weights.status());
  // The scoring context: refused past the model, never capped (as in cact-run perplexity).
  if (ctx_ == 0) ctx_ = std::min<int64_t>(g->max_seq_len, kDefaultScoringContext);
  if (ctx_ > int64_t(g->max_seq_len))
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--ctx %d is more than the model's max_seq_len %d", ctx_, g->max_seq_len)));
  auto tokenizer = train::LoadTrainingTokenizer(tokenizer_);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  auto tok = Tokenizer::FromBlob(tokenizer->blob);
  if (!tok.ok()) return Fail(tok.status());
  if (uint32_t(tok->vocab_size()) != g->vocab) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("tokenizer %s has %d pieces; %s has vocab %d", tokenizer->source,
                        tok->vocab_size(), weights_, g->vocab)));
  }
  auto text = FileBytes::Open(text_);
  if (!text.ok()) return Fail(text.status());
  const std::vector<int32_t> tokens = train::ScoredTokens(
      *tok, std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), ctx_,
      chunks_);
  const torchscript::ThreadSettings pools = torchscript::ConfigureThreads(threads_);
  torch::set_num_threads(pools.total);
  train::WeightMap w = *weights;
  if (!fake_quant_.empty()) {
    auto scheme = ParseScheme(fake_quant_);
    if (!scheme.ok()) return Fail(scheme.status());
    train::FakeQuantOptions fq;
    fq.bits = train::WidthsOfScheme(*g, *scheme);
    torch::NoGradGuard no_grad;
    w = train::FakeQuantized(w, fq);
  }
  train::NeedleNet net(*g);
  const double loss = train::HeldoutLoss(net, w, tokens, ctx_, tok->bos_id());
  if (json_) {
    nlohmann::ordered_json j{
        {"weights", weights_},      {"file", text_},    {"ctx", ctx_},
        {"tokens", tokens.size()},  {"nll_mean", loss}, {"ppl", std::exp(loss)},
        {"fake_quant", fake_quant_}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%s: %zu tokens, mean NLL %.6f, PPL %.4f%s\n", weights_.c_str(), tokens.size(), loss,
        std::exp(loss),
        fake_quant_.empty() ? " (FP32)" : (" (fake-quantized " + fake_quant_ + ")").c_str());
  }
  return 0;
}

}  // namespace cact::torch_tool
