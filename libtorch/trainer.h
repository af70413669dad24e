// Pre-training from scratch: AdamW on random windows of a token stream, linear warmup then
// cosine decay, global gradient-norm clipping, fixed seeds; a held-out loss scored like
// `cact-run perplexity`; then an optional quantization-aware phase (fake_quant.h) so the
// weights settle where the CQ codebooks put them.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "libtorch/fake_quant.h"
#include "libtorch/needle_net.h"

namespace cact::train {

struct HeadIndex {
  uint32_t layer = 0;
  uint32_t head = 0;  // query head
};

struct TrainOptions {
  int64_t steps = 1000;       // optimizer steps in all, the quantization-aware ones included
  int64_t qat_steps = 0;      // the last qat_steps steps run on fake-quantized weights
  int64_t warmup = 100;       // linear warmup steps
  double lr = 3e-3;           // peak learning rate
  double final_lr = 3e-4;     // cosine decay ends here at the last step
  double weight_decay = 0.1;  // AdamW, matrices only (norms, gates, diagonals: none)
  double beta1 = 0.9, beta2 = 0.95;
  double clip = 1.0;         // max global gradient norm
  int64_t batch = 16;        // sequences per step
  int64_t seq = 256;         // tokens per sequence: BOS + seq-1 tokens of the stream
  uint64_t seed = 0;         // initial weights and window sampling
  int64_t eval_every = 100;  // held-out loss every N steps (and at the end)
  int64_t eval_chunks = 32;  // held-out chunks of each curve point (0 = all); the final
                             // loss is over every held-out token given
  int32_t bos_id = 2;
  FakeQuantOptions qat;  // the scheme the quantization-aware phase fakes
  // Attention losses that build the circuit copying from the context needs, which plain
  // training forms slowly (docs/reference-model/tool-call-training.md): previous-token heads
  // learn to look from each token at the one before it, induction heads from each token
  // whose last kInductionMatch tokens occurred before at the token that followed them
  // there, copy heads from each token at the latest earlier occurrence of the kInductionMatch
  // tokens that follow it (where what comes next already stood: a value in a query that a
  // call repeats). Each adds attention_loss_weight x its mean -log attention weight.
  std::vector<HeadIndex> previous_token_heads;
  std::vector<HeadIndex> induction_heads;
  std::vector<HeadIndex> copy_heads;
  std::vector<int64_t> copy_classes;  // per token id, what copy heads match (empty: the ids;
                                      // train/training_data.h WithoutWordStart)
  double attention_loss_weight = 1.0;
};

// How many tokens ending at a query must repeat an earlier run for an induction head to be
// taught to look past that run: long enough that chance repeats of short pieces in ordinary
// text rarely count.
inline constexpr int64_t kInductionMatch = 3;

struct CurvePoint {
  int64_t step = 0;
  int64_t tokens = 0;  // training tokens seen so far
  double lr = 0;
  double train_loss = 0;      // mean over the steps since the previous point
  double heldout_loss = NAN;  // NaN when not evaluated at this point
  double attention_loss = NAN;  // mean of the attention losses since the previous point; NaN
                                // without attention heads
  double seconds = 0;
  bool qat = false;
};

struct TrainSummary {
  std::vector<CurvePoint> curve;
  double seconds = 0;
  double tokens_per_second = 0;
  double final_heldout_loss = NAN;
};

// Called at every logged point (each eval_every/10 steps, each evaluation, and the end).
using CurveCallback = std::function<void(const CurvePoint&, int64_t total_steps)>;

// Trains `weights` in place. `train_tokens` must hold more than `seq` tokens. With
// `pre_qat` set and qat_steps > 0, a copy of the weights just before the quantization-aware
// phase is stored there.
absl::StatusOr<TrainSummary> Train(const NeedleNet& net, const TrainOptions& opt,
                                   std::span<const int32_t> train_tokens,
                                   std::span<const int32_t> heldout_tokens, WeightMap* weights,
                                   const CurveCallback& on_point = nullptr,
                                   WeightMap* pre_qat = nullptr);

// Every head exists in the geometry (layer < num_layers, query head < num_heads).
absl::Status CheckHeads(const Geometry& g, const std::vector<HeadIndex>& heads);

// Mean over the taps of -log(attention weight of key t-1 for query t), over t >= 1 and the
// batch. Every tap must hold its probs (NeedleNet::Logits sets them).
torch::Tensor PreviousTokenLoss(const std::vector<AttentionTap>& taps);

// For tokens [B, T]: per query t, the key an induction head should look at: s + 1 for the
// latest s < t whose `match` tokens ending at s equal those ending at t; -1 where there is
// none ([B, T] int64).
torch::Tensor InductionTargets(const torch::Tensor& tokens, int64_t match);

// For tokens [B, T]: per query t, the key a copy head should look at: the latest s with
// s + match - 1 <= t whose `match` tokens starting at s equal tokens t+1 .. t+match; -1
// where there is none or fewer than `match` tokens follow t ([B, T] int64). With `classes`
// (per token id), tokens match when their classes do.
torch::Tensor CopyTargets(const torch::Tensor& tokens, int64_t match,
                          std::span<const int64_t> classes = {});

// Mean over the taps and the queries with a target of -log(attention weight of the target).
// Undefined when no query has one.
torch::Tensor TargetAttentionLoss(const std::vector<AttentionTap>& taps,
                                  const torch::Tensor& targets);

// Mean next-token NLL (nats) over `tokens` cut into chunks of ctx-1 tokens, each fed as BOS +
// chunk[0..n-2] so every token of the chunk is predicted (cact-run perplexity's scoring).
// max_chunks 0 = all.
double HeldoutLoss(const NeedleNet& net, const WeightMap& w, std::span<const int32_t> tokens,
                   int64_t ctx, int32_t bos_id, int64_t max_chunks = 0);

}  // namespace cact::train
