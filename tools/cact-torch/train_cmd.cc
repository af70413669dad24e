// cact-torch train: a Needle-architecture model from scratch (libtorch/trainer.h), then its
// files: OUT.cact, OUT.safetensors (FP32), OUT.pre-qat.safetensors (before the
// quantization-aware phase), OUT.curve.tsv and OUT.curve.svg (the loss curve).
#include <filesystem>

#include "tools/cact-torch/commands.h"
#include "tools/common/cli.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/text/tokenizer.h"
#include "libtorch/blas_threads.h"
#include "formats/sentencepiece_model.h"
#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/resources.h"
#include "quant/synthetic.h"
#include "train/corpus_manifest.h"
#include "train/geometry_spec.h"
#include "train/loss_curve.h"
#include "libtorch/trainer.h"
#include "train/trained_model.h"

namespace cact::torch_tool {
namespace {

using namespace cact::train;

std::string StemOf(const std::string& cact_path) {
  for (const char* ext : {".cact.zst", ".cact"}) {
    const std::string e = ext;
    if (cact_path.size() > e.size() &&
        cact_path.compare(cact_path.size() - e.size(), e.size(), e) == 0)
      return cact_path.substr(0, cact_path.size() - e.size());
  }
  return cact_path;
}

// "LAYER.HEAD", both whole numbers; the geometry's bounds are checked by the trainer.
std::optional<HeadIndex> ParseHeadIndex(const std::string& s) {
  const size_t dot = s.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == s.size()) return std::nullopt;
  const std::string layer = s.substr(0, dot), head = s.substr(dot + 1);
  for (const std::string* part : {&layer, &head}) {
    if (part->size() > 4 || part->find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
  }
  return HeadIndex{uint32_t(std::stoul(layer)), uint32_t(std::stoul(head))};
}

std::string Duration(double s) {
  const int m = int(s) / 60;
  return absl::StrFormat("%d:%02d", m, int(s) - 60 * m);
}

}  // namespace

void TrainCommand::Add(CLI::App& app) {
  sub_ = app.add_subcommand("train", "train a Needle-architecture model from scratch (libtorch)");
  sub_->footer("Geometries (--geometry NAME[,key=value...]):\n" + DescribeGeometries() +
               "The corpus: --manifest (a committed list with sizes and SHA-256, checked), or "
               "--corpus paths (files and directories, split by content hash), or --text/--heldout "
               "files. docs/training.md has the reference model's command.");
  sub_->add_option("--corpus", data_.corpus,
                   "files and directories to train on (docs/training-corpus.md has the rules)");
  sub_->add_option("--manifest", data_.manifest,
                   "a corpus manifest (OUT.corpus.tsv of an earlier run): every file checked");
  sub_->add_flag_function(
      "--collapse-spaces",
      [this](int64_t) { data_.spacing = train::Spacing::kCollapse; },
      "normalise the corpus's lines without leading, trailing or repeated spaces and tabs "
      "(pass it again with --manifest to reproduce such a run)");
  sub_->add_option("--text", data_.text, "or plain training text files...");
  sub_->add_option("--heldout", data_.heldout, "...and held-out text files (scored as one text)");
  sub_->add_option("--heldout-chunks", data_.heldout_chunks,
                   "held-out chunks of seq-1 tokens scored at the end (default 128; 0 = all)")
      ->check(tools::WholeIn(0, UINT32_MAX));
  sub_->add_option("--tokenizer", data_.tokenizer_path,
                   "SentencePiece .model (default: the built-in 512-piece Debian tokenizer)");
  sub_->add_option("--geometry", geometry_, "NAME[,key=value...] (default reference)");
  sub_->add_option("-o,--output", output_, "OUT.cact; also OUT.safetensors, OUT.curve.{tsv,svg}")
      ->required();
  sub_->add_option("--steps", opt_.steps, "optimizer steps in all (default 1000)")
      ->check(tools::WholeIn(1, INT32_MAX));
  sub_->add_option("--qat-steps", opt_.qat_steps,
                   "the last N steps on CQ fake-quantized weights (default 0)")
      ->check(tools::WholeIn(0, INT32_MAX));
  sub_->add_option("--warmup", opt_.warmup, "linear warmup steps (default 100)")
      ->check(tools::WholeIn(0, INT32_MAX));
  sub_->add_option("--lr", opt_.lr, "peak learning rate (default 3e-3)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--final-lr", opt_.final_lr, "learning rate at the last step (default 3e-4)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--weight-decay", opt_.weight_decay, "AdamW decay of matrices (default 0.1)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--clip", opt_.clip, "max global gradient norm (default 1)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--batch", opt_.batch, "sequences per step (default 16)")
      ->check(tools::WholeIn(1, 1 << 20));
  sub_->add_option("--seq", opt_.seq, "tokens per sequence, BOS included (default 256)")
      ->check(tools::WholeIn(2, UINT32_MAX));
  sub_->add_option("--seed", opt_.seed, "initial weights and sampling (default 0)")
      ->check(tools::WholeIn(0, UINT64_MAX));
  sub_->add_option("--eval-every", opt_.eval_every, "held-out loss every N steps (default 100)")
      ->check(tools::WholeIn(1, INT32_MAX));
  const CLI::Validator head_index(
      [](std::string& s) -> std::string {
        return ParseHeadIndex(s) ? "" : "must be LAYER.HEAD (e.g. 0.0), got '" + s + "'";
      },
      "LAYER.HEAD");
  sub_->add_option("--previous-token-head", previous_token_heads_,
                   "LAYER.HEAD (repeatable): also train this query head to look at the previous "
                   "token")
      ->check(head_index);
  sub_->add_option("--induction-head", induction_heads_,
                   "LAYER.HEAD (repeatable): also train this query head to look past an earlier "
                   "occurrence of the last 3 tokens (with a previous-token head in an earlier "
                   "layer: copying from the context)")
      ->check(head_index);
  sub_->add_option("--copy-head", copy_heads_,
                   "LAYER.HEAD (repeatable): also train this query head to look at the latest "
                   "earlier occurrence of the 3 tokens that follow (where a value it is to repeat "
                   "stood, such as a city in a query)")
      ->check(head_index);
  sub_->add_option("--attention-loss-weight", opt_.attention_loss_weight,
                   "weight of those heads' attention loss (default 1)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--scheme", scheme_,
                   "widths of the .cact and of the quantization-aware phase (default " +
                       std::string(kDefaultScheme) + ")");
  sub_->add_option("-t,--threads", threads_, "threads (default: the CPUs available)")
      ->check(tools::WholeIn(0, 256));
  sub_->add_flag("-q,--quiet", quiet_, "no progress lines");
  sub_->footer(sub_->get_footer() +
               "\nExample:\n  cact-torch train --text train.txt --heldout heldout.txt --steps 200 "
               "-o small.cact");
}

int TrainCommand::Run() {
  const Stopwatch clock;
  auto geometry = ParseGeometrySpec(geometry_);
  if (!geometry.ok()) return Fail(geometry.status());
  auto scheme = ParseScheme(scheme_);
  if (!scheme.ok()) return Fail(scheme.status());
  if (opt_.seq > int64_t(geometry->max_seq_len)) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--seq %d is longer than the geometry's max_seq_len %d", opt_.seq, geometry->max_seq_len)));
  }
  for (const std::string& h : previous_token_heads_)
    opt_.previous_token_heads.push_back(*ParseHeadIndex(h));
  for (const std::string& h : induction_heads_) opt_.induction_heads.push_back(*ParseHeadIndex(h));
  for (const std::string& h : copy_heads_) opt_.copy_heads.push_back(*ParseHeadIndex(h));
  for (const auto* heads : {&opt_.previous_token_heads, &opt_.induction_heads, &opt_.copy_heads})
    if (auto s = CheckHeads(*geometry, *heads); !s.ok()) return Fail(s);
  data_.ctx = opt_.seq;  // held-out chunks as long as the training sequences
  if (!quiet_) std::fprintf(stderr, "reading and tokenizing the corpus...\n");
  auto data = train::LoadTrainingData(data_, *geometry);
  if (!data.ok()) return Fail(data.status());
  if (!opt_.copy_heads.empty()) opt_.copy_classes = train::WithoutWordStart(data->tokenizer_blob);
  const torchscript::ThreadSettings pools = torchscript::ConfigureThreads(threads_);
  // Training runs elementwise work as large as its matrix products: both pools get T.
  torch::set_num_threads(pools.total);
  torch::manual_seed(opt_.seed);
  at::globalContext().setFlushDenormal(true);
  opt_.bos_id = data->bos_id;
  opt_.qat.bits = WidthsOfScheme(*geometry, *scheme);

  const std::string stem = StemOf(output_);
  NeedleNet net(*geometry);
  WeightMap weights = InitialWeights(*geometry, opt_.seed);
  WeightMap pre_qat;
  std::fprintf(stderr,
               "model: %s (%.2f M parameters); %zu training tokens, %zu held-out tokens; "
               "%lld steps x %lld x %lld tokens, %lld quantization-aware\n",
               geometry_.c_str(), double(ParameterCount(weights)) / 1e6, data->train.size(),
               data->heldout.size(), (long long)opt_.steps, (long long)opt_.batch,
               (long long)opt_.seq, (long long)opt_.qat_steps);
  std::fprintf(stderr, "%s\n",
               torchscript::DescribeThreads(torchscript::DescribeBlas(), pools).c_str());

  // The pre-QAT weights are kept: quality docs compare the float model with its quantized
  // forms with and without the quantization-aware phase.
  auto on_point = [&](const CurvePoint& p, int64_t total) {
    if (quiet_) return;
    const double eta = p.seconds / double(p.step) * double(total - p.step);
    std::string line = absl::StrFormat(
        "step %5d/%d  loss %.4f  %slr %.2e  %s%6.0f tok/s  %s elapsed, eta %s", p.step, total,
        p.train_loss,
        std::isnan(p.attention_loss) ? std::string()
                                     : absl::StrFormat("attention %.3f  ", p.attention_loss),
        p.lr, p.qat ? "QAT  " : "", double(p.tokens) / std::max(p.seconds, 1e-9),
        Duration(p.seconds), Duration(eta));
    if (!std::isnan(p.heldout_loss))
      line +=
          absl::StrFormat("  held-out %.4f (ppl %.2f)", p.heldout_loss, std::exp(p.heldout_loss));
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  auto summary = Train(net, opt_, data->train, data->heldout, &weights, on_point,
                       opt_.qat_steps > 0 ? &pre_qat : nullptr);
  if (!summary.ok()) return Fail(summary.status());

  std::map<std::string, std::string> meta = {
      {"trained_by", "cact-torch train"},
      {"geometry", geometry_},
      {"seed", std::to_string(opt_.seed)},
      {"steps", std::to_string(opt_.steps)},
      {"qat_steps", std::to_string(opt_.qat_steps)},
      {"corpus", data->description},
      {"heldout_loss", absl::StrFormat("%.6f", summary->final_heldout_loss)}};
  if (!previous_token_heads_.empty())
    meta["previous_token_heads"] = absl::StrJoin(previous_token_heads_, ",");
  if (!induction_heads_.empty()) meta["induction_heads"] = absl::StrJoin(induction_heads_, ",");
  if (!copy_heads_.empty()) meta["copy_heads"] = absl::StrJoin(copy_heads_, ",");
  if (!previous_token_heads_.empty() || !induction_heads_.empty() || !copy_heads_.empty())
    meta["attention_loss_weight"] = absl::StrFormat("%g", opt_.attention_loss_weight);
  std::vector<std::string> written;
  if (!data->documents.empty()) {
    if (auto s = WriteManifest(stem + ".corpus.tsv", ManifestOf(data->documents)); !s.ok())
      return Fail(s);
    written.push_back(stem + ".corpus.tsv");
  }
  if (auto s = WriteFileAtomic(
          stem + ".heldout.txt",
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data->heldout_text.data()),
                                   data->heldout_text.size()));
      !s.ok())
    return Fail(s);
  written.push_back(stem + ".heldout.txt");
  if (opt_.qat_steps > 0) {
    Safetensors pre = ToSafetensors(pre_qat, *geometry);
    SetModelMetadata(*geometry, *scheme, meta, &pre);
    if (auto s = WriteSafetensors(stem + ".pre-qat.safetensors", pre); !s.ok()) return Fail(s);
    written.push_back(stem + ".pre-qat.safetensors");
  }
  Safetensors st = ToSafetensors(weights, *geometry);
  SetModelMetadata(*geometry, *scheme, meta, &st);
  if (auto s = WriteSafetensors(stem + ".safetensors", st); !s.ok()) return Fail(s);
  written.push_back(stem + ".safetensors");
  auto report =
      BuildTrainedCact(st, data->tokenizer_blob, data->tokenizer_source, *scheme, output_);
  if (!report.ok()) return Fail(report.status());
  written.push_back(output_);
  std::vector<LossPoint> points;
  for (const CurvePoint& p : summary->curve)
    points.push_back({p.step, p.tokens, p.lr, p.train_loss, p.heldout_loss, p.seconds, p.qat});
  if (auto s = WriteLossCurveTsv(stem + ".curve.tsv", points); !s.ok()) return Fail(s);
  LossCurvePlot plot;
  plot.title =
      "cact-torch train " + geometry_ + ": " + std::filesystem::path(output_).filename().string();
  plot.unigram_loss = data->unigram_loss;
  if (auto s = WriteLossCurveSvg(stem + ".curve.svg", points, plot); !s.ok()) return Fail(s);
  written.push_back(stem + ".curve.tsv");
  written.push_back(stem + ".curve.svg");

  std::printf("trained %lld steps (%lld quantization-aware) in %s: %.0f tokens/s\n",
              (long long)opt_.steps, (long long)opt_.qat_steps, Duration(summary->seconds).c_str(),
              summary->tokens_per_second);
  if (!std::isnan(summary->final_heldout_loss)) {
    std::printf(
        "held-out: %zu tokens, loss %.4f nats, PPL %.3f; unigram baseline PPL %.3f (ratio %.3f)\n",
        data->heldout.size(), summary->final_heldout_loss, std::exp(summary->final_heldout_loss),
        std::exp(data->unigram_loss), std::exp(summary->final_heldout_loss - data->unigram_loss));
    std::printf(
        "score the .cact on the same tokens: cact-run perplexity %s -f %s --ctx %lld --chunks "
        "%lld\n",
        output_.c_str(), (stem + ".heldout.txt").c_str(), (long long)opt_.seq,
        (long long)data_.heldout_chunks);
  }
  std::printf("%s: %llu bytes, scheme %s\n", output_.c_str(),
              (unsigned long long)report->file_bytes, scheme->ToString().c_str());
  for (const std::string& p : written) std::printf("wrote %s\n", p.c_str());
  std::printf("total %s\n", Duration(clock.Seconds()).c_str());
  return 0;
}

}  // namespace cact::torch_tool
