// LoRA fine-tuning as the official `needle finetune` does it: rank-r adapters on the five
// attention projections of every layer (q, k, v, gate, out), the base frozen, loss on the
// target tokens only (train/finetune_data.h renders and masks), AdamW with warmup + cosine
// decay and gradient clipping, a held-out split, and by default the forward on CQ
// fake-quantized merged weights (the widths of the base file, or one width), so the adapter
// is trained for the numerics the merged .cact will have. Projections that are zero in every
// layer get no adapter (kDeadTargetMaxAbs).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/finetune_data.h"
#include "train/peft_adapter.h"
#include "libtorch/fake_quant.h"
#include "libtorch/needle_net.h"

namespace cact::train {

// A target projection whose weights never exceed this in any layer is not adapted (the
// official lora_target_paths rule).
inline constexpr double kDeadTargetMaxAbs = 1e-6;

struct FinetuneOptions {
  uint32_t rank = 16;
  double alpha = 32;  // merge scale alpha / rank
  int64_t epochs = 3;
  int64_t batch = 16;
  double lr = 1e-4;  // peak; warmup max(1, steps/20) then cosine to 0
  double weight_decay = 1e-4;
  double clip = 1.0;
  double val_split = 0.1;  // held-out share of the examples (at least one stays for training)
  uint64_t seed = 0;
  bool qat = true;          // forward on fake-quantized merged weights...
  FakeQuantOptions widths;  // ...at the base file's widths
};

struct FinetuneReport {
  size_t train_examples = 0, val_examples = 0;
  int64_t steps = 0, max_len = 0;
  double val_loss_before = NAN, val_loss_after = NAN;  // masked target loss, mean over examples
  std::vector<double> epoch_train_loss, epoch_val_loss;
  std::vector<std::string> skipped_targets;  // projections zero in every layer
  double seconds = 0;
};

// Called after each logged step: (step, total steps, loss).
using FinetuneProgress = std::function<void(int64_t, int64_t, double)>;

// Trains an adapter for `base` (its float weights) on `examples` encoded to `max_len`.
absl::StatusOr<PeftAdapter> Finetune(const NeedleNet& net, const WeightMap& base,
                                     const std::vector<EncodedExample>& examples,
                                     const FinetuneOptions& opt, FinetuneReport* report,
                                     const FinetuneProgress& progress = nullptr);

// `base` with every adapter pair merged: W + (alpha / rank) * B @ A.
WeightMap MergeAdapter(const WeightMap& base, const PeftAdapter& adapter);

}  // namespace cact::train
