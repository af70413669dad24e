// cact-torch finetune: a LoRA adapter for a .cact on official fine-tuning JSONL
// (libtorch/finetune.h), written as a PEFT adapter directory for `cact-quant lora`.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "engine/text/tokenizer.h"
#include "libtorch/blas_threads.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "lib/file_identity.h"
#include "lib/resources.h"
#include "quant/dequant_export.h"
#include "tools/cact-torch/commands.h"
#include "tools/common/cli.h"
#include "tools/common/template_option.h"
#include "train/finetune_data.h"
#include "train/official_adapter.h"
#include "quant/scheme_inference.h"

namespace cact::torch_tool {

void FinetuneCommand::Add(CLI::App& app) {
  sub_ = app.add_subcommand(
      "finetune", "LoRA fine-tuning of a .cact on official JSONL examples -> a PEFT adapter");
  sub_->footer(
      "JSONL lines: {\"query\", \"tools\", \"answers\", optional \"reasoning\", \"system\"} or "
      "single-turn chat {\"messages\", \"tools\"}, rendered with the official template "
      "(--template); the loss is on the target (tool call) only. Merge with: cact-quant lora "
      "BASE --adapter OUT -o MERGED.cact");
  sub_->add_option("base", base_, "base .cact")->required();
  sub_->add_option("--data", data_, "fine-tuning examples (.jsonl)")->required();
  sub_->add_option("-o,--output", output_, "adapter directory (PEFT) or file (--format pickle)")
      ->required();
  sub_->add_option("--rank", opt_.rank, "LoRA rank (default 16)")
      ->check(tools::WholeIn(1, 4096));
  sub_->add_option("--alpha", opt_.alpha, "LoRA alpha; merge scale alpha/rank (default 32)")
      ->check(tools::FiniteNumber());
  sub_->add_option("--epochs", opt_.epochs, "passes over the training split (default 3)")
      ->check(tools::WholeIn(1, 1000000));
  sub_->add_option("--batch", opt_.batch, "examples per step (default 16)")
      ->check(tools::WholeIn(1, 1 << 20));
  sub_->add_option("--lr", opt_.lr, "peak learning rate (default 1e-4)")
      ->check(tools::FiniteAtLeast(0));
  sub_->add_option("--val-split", opt_.val_split, "held-out share of the examples (default 0.1)")
      ->check(tools::FiniteIn(0, 1));
  max_len_opt_ = sub_->add_option("--max-len", max_len_,
                                  "longest sequence, tokens, 2 to max_seq_len (default: "
                                  "min(1024, max_seq_len))")
      ->check(tools::WholeIn(2, UINT32_MAX));
  sub_->add_option("--seed", opt_.seed, "adapter init, split and order (default 0)")
      ->check(tools::WholeIn(0, UINT64_MAX));
  sub_->add_option("--qat-bits", qat_bits_,
                   "numerics trained through, recorded in the adapter: auto (the base's widths), "
                   "none (float), 2 or 4 (every CQ matrix at that width) (default auto)")
      ->check(CLI::IsMember({"auto", "none", "2", "4"}));
  sub_->add_flag("--no-qat", no_qat_, "deprecated: --qat-bits none")->group("");
  sub_->add_option("--format", format_,
                   "peft: a PEFT directory (-o DIR); pickle: the official adapter pickle "
                   "(-o FILE.pkl), which `needle build --lora` reads (default peft)")
      ->check(CLI::IsMember({"peft", "pickle"}));
  AddTemplateOption(*sub_, &template_);
  sub_->add_option("-t,--threads", threads_, "threads (default: the CPUs available)")
      ->check(tools::WholeIn(0, 256));
  sub_->add_flag("-q,--quiet", quiet_, "no progress lines");
  sub_->footer(sub_->get_footer() +
               "\nExample:\n  cact-torch finetune base.cact --data calls.jsonl -o adapter/");
}

int FinetuneCommand::Run() {
  const Stopwatch clock;
  // Outputs never replace inputs: the pickle itself, or the PEFT directory's two files.
  const std::vector<std::string> outputs =
      format_ == "pickle" ? std::vector<std::string>{output_}
                          : std::vector<std::string>{output_ + "/" + train::kPeftWeightsFile,
                                                     output_ + "/" + train::kPeftConfigFile};
  for (const std::string& out : outputs)
    if (absl::Status st = CheckOutputIsNotInput(out, {base_, data_}, "-o"); !st.ok())
      return Fail(st);
  auto file = CactFile::Open(base_);
  if (!file.ok()) return Fail(file.status());
  if (absl::Status finite = CheckFinite(*file); !finite.ok()) return Fail(finite);
  auto tok = Tokenizer::FromBytes(file->tokenizer_blob(), base_);
  if (!tok.ok()) return Fail(tok.status());
  auto set = train::ReadFinetuneJsonl(data_);
  if (!set.ok()) return Fail(set.status());
  if (set->examples.size() < 2)
    return Fail(absl::InvalidArgumentError(data_ + ": fewer than 2 usable examples"));
  const Geometry& g = file->geometry();
  // Refused, never capped, when given (the rule of every tool); the default adapts.
  if (max_len_opt_->count() && max_len_ > g.max_seq_len)
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "--max-len %d is more than the model's max_seq_len %d", max_len_, g.max_seq_len)));
  const ChatTemplate chat_template = *ParseChatTemplate(template_);  // checked when parsed
  const size_t max_len = train::FitMaxLen(
      *tok, set->examples, std::min<size_t>(max_len_, g.max_seq_len), chat_template);
  std::vector<train::EncodedExample> encoded;
  for (const auto& ex : set->examples)
    encoded.push_back(train::EncodeExample(*tok, ex, max_len, chat_template));

  auto st = DequantizedWeights(*file);
  if (!st.ok()) return Fail(st.status());
  auto base = train::FromSafetensors(*st, g, base_);
  if (!base.ok()) return Fail(base.status());
  // The numerics, as the official --qat-bits: auto trains through the base's own widths
  // (recorded as its bits map), a width through every CQ matrix at that width.
  if (no_qat_) qat_bits_ = "none";
  opt_.qat = qat_bits_ != "none";
  std::optional<int64_t> qat_bits;
  std::optional<std::string> qat_bits_map;
  for (const TensorEntry& t : file->tensors())
    if (t.is_cq()) opt_.widths.bits[t.name] = t.record.bits;
  if (qat_bits_ == "auto") {
    qat_bits_map = InferScheme(*file);
  } else if (qat_bits_ != "none") {
    qat_bits = std::stoi(qat_bits_);
    for (auto& [name, bits] : opt_.widths.bits) bits = uint32_t(*qat_bits);
  }
  const torchscript::ThreadSettings pools = torchscript::ConfigureThreads(threads_);
  torch::set_num_threads(pools.total);

  std::fprintf(stderr,
               "data: %zu examples (%zu lines skipped), sequences of %zu tokens, template %s\n",
               set->examples.size(), set->skipped, max_len,
               std::string(ChatTemplateName(chat_template)).c_str());
  std::fprintf(stderr, "lora: rank %u, alpha %g, q/k/v/gate/out of %u layers; numerics: %s\n",
               opt_.rank, opt_.alpha, g.num_layers,
               qat_bits_map ? absl::StrFormat("CQ fake-quantized merged weights (the base's "
                                              "widths, %s), straight-through",
                                              *qat_bits_map).c_str()
               : qat_bits   ? absl::StrFormat("CQ fake-quantized merged weights (W%d), "
                                              "straight-through",
                                              *qat_bits).c_str()
                            : "float merged weights");
  train::NeedleNet net(g);
  train::FinetuneReport report;
  auto progress = [&](int64_t step, int64_t total, double loss) {
    if (!quiet_)
      std::fprintf(stderr, "step %4lld/%lld  loss %.4f\n", (long long)step, (long long)total, loss);
  };
  auto adapter = train::Finetune(net, *base, encoded, opt_, &report, progress);
  if (!adapter.ok()) return Fail(adapter.status());
  adapter->base_model = base_;
  if (qat_bits) adapter->metadata["qat_bits"] = std::to_string(*qat_bits);
  if (qat_bits_map) adapter->metadata["qat_bits_map"] = *qat_bits_map;
  adapter->metadata["seed"] = std::to_string(opt_.seed);
  if (format_ == "pickle") {
    if (auto s = train::WriteOfficialAdapter(
            output_, *adapter,
            {.base = base_, .qat_bits = qat_bits, .qat_bits_map = qat_bits_map,
             .seed = int64_t(opt_.seed)});
        !s.ok())
      return Fail(s);
  } else if (auto s = train::WritePeftAdapter(output_, *adapter); !s.ok()) {
    return Fail(s);
  }

  std::printf("fine-tuned %lld steps on %zu examples (%zu held out) in %.1f s\n",
              (long long)report.steps, report.train_examples, report.val_examples, report.seconds);
  for (const std::string& t : report.skipped_targets)
    std::printf("%s: zero in every layer, not adapted\n", t.c_str());
  for (size_t e = 0; e < report.epoch_val_loss.size(); ++e)
    std::printf("epoch %zu: train loss %.4f, held-out loss %.4f\n", e + 1,
                report.epoch_train_loss[e], report.epoch_val_loss[e]);
  std::printf("held-out target loss: %.4f before, %.4f after\n", report.val_loss_before,
              report.val_loss_after);
  if (format_ == "pickle") {
    std::printf("wrote %s (official adapter pickle)\n", output_.c_str());
    std::printf("merge: cact-quant lora %s --adapter %s -o MERGED.cact\n", base_.c_str(),
                output_.c_str());
  } else {
    std::printf("wrote %s/%s and %s/%s\n", output_.c_str(), train::kPeftWeightsFile,
                output_.c_str(), train::kPeftConfigFile);
    std::printf(
        "merge: cact-quant lora %s --adapter %s/%s --adapter-config %s/%s -o MERGED.cact\n",
        base_.c_str(), output_.c_str(), train::kPeftWeightsFile, output_.c_str(),
        train::kPeftConfigFile);
  }
  std::printf("total %.1f s\n", clock.Seconds());
  return 0;
}

}  // namespace cact::torch_tool
