#include "libtorch/trainer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/eval/perplexity.h"
#include "formats/needle/tensor_table.h"
#include "lib/status.h"

namespace cact::train {
namespace {

using torch::Tensor;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Linear warmup to the peak, then cosine decay to final_lr at the last step.
double LearningRate(const TrainOptions& o, int64_t step) {
  if (step < o.warmup) return o.lr * double(step + 1) / double(o.warmup);
  const double span = std::max<int64_t>(1, o.steps - o.warmup - 1);
  const double progress = std::min(1.0, double(step - o.warmup) / span);
  return o.final_lr + 0.5 * (o.lr - o.final_lr) * (1.0 + std::cos(M_PI * progress));
}

// A batch of windows [BOS, s[o], ..., s[o+seq-2]] at random offsets of the stream.
Tensor SampleBatch(std::span<const int32_t> stream, const TrainOptions& o, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, stream.size() - size_t(o.seq));
  Tensor batch = torch::empty({o.batch, o.seq}, torch::kInt64);
  auto acc = batch.accessor<int64_t, 2>();
  for (int64_t b = 0; b < o.batch; ++b) {
    const size_t off = pick(rng);
    acc[b][0] = o.bos_id;
    for (int64_t t = 1; t < o.seq; ++t) acc[b][t] = stream[off + size_t(t) - 1];
  }
  return batch;
}

// The taps' heads by what they are taught, in the order of the taps.
struct TapKinds {
  size_t previous = 0, induction = 0, copy = 0;
};

// The mean of the attention losses of the taps (previous-token, then induction, then copy
// heads). Undefined when none applies (no target in the batch and no previous-token head).
Tensor AttentionLoss(const std::vector<AttentionTap>& taps, const TapKinds& kinds,
                     std::span<const int64_t> copy_classes, const Tensor& batch) {
  std::vector<Tensor> parts;
  auto first = taps.begin();
  // one kind of head: [first, first + count), weighted by its number of heads
  auto add = [&](size_t count, auto loss_of) {
    if (count == 0) return;
    Tensor loss = loss_of(std::vector<AttentionTap>(first, first + std::ptrdiff_t(count)));
    if (loss.defined()) parts.push_back(loss * double(count));
    first += std::ptrdiff_t(count);
  };
  add(kinds.previous, [](const auto& heads) { return PreviousTokenLoss(heads); });
  add(kinds.induction, [&](const auto& heads) {
    return TargetAttentionLoss(heads, InductionTargets(batch, kInductionMatch));
  });
  add(kinds.copy, [&](const auto& heads) {
    return TargetAttentionLoss(heads, CopyTargets(batch, kInductionMatch, copy_classes));
  });
  if (parts.empty()) return {};
  Tensor sum = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) sum = sum + parts[i];
  return sum / double(taps.size());
}

}  // namespace

namespace {

// The `match` tokens of row `b` from `start` on.
std::vector<int64_t> RunAt(const torch::TensorAccessor<int64_t, 2>& ids, int64_t b, int64_t start,
                           int64_t match) {
  std::vector<int64_t> run(static_cast<size_t>(match));
  for (int64_t j = 0; j < match; ++j) run[size_t(j)] = ids[b][start + j];
  return run;
}

// For ids [B, T]: per row, `row(b, out)` sets the targets of the row's queries; -1 elsewhere.
template <typename Row>
Tensor TargetsPerRow(const Tensor& ids, Row row) {
  Tensor targets = torch::full({ids.size(0), ids.size(1)}, int64_t{-1}, torch::kInt64);
  auto out = targets.accessor<int64_t, 2>();
  for (int64_t b = 0; b < ids.size(0); ++b) row(b, out);
  return targets;
}

}  // namespace

Tensor InductionTargets(const Tensor& tokens, int64_t match) {
  TORCH_CHECK(tokens.dim() == 2 && match >= 1, "InductionTargets: tokens [B, T], match >= 1");
  const Tensor ids = tokens.to(torch::kInt64).contiguous();
  const auto in = ids.accessor<int64_t, 2>();
  return TargetsPerRow(ids, [&](int64_t b, auto& out) {
    // the run of `match` tokens ending at each position -> the latest position it ended at
    std::map<std::vector<int64_t>, int64_t> last;
    for (int64_t t = match - 1; t < ids.size(1); ++t) {
      auto [it, fresh] = last.try_emplace(RunAt(in, b, t - match + 1, match), t);
      if (!fresh) {
        out[b][t] = it->second + 1;
        it->second = t;
      }
    }
  });
}

Tensor CopyTargets(const Tensor& tokens, int64_t match, std::span<const int64_t> classes) {
  TORCH_CHECK(tokens.dim() == 2 && match >= 1, "CopyTargets: tokens [B, T], match >= 1");
  Tensor ids = tokens.to(torch::kInt64).contiguous();
  if (!classes.empty()) {
    TORCH_CHECK(ids.numel() == 0 || (ids.min().item<int64_t>() >= 0 &&
                                     ids.max().item<int64_t>() < int64_t(classes.size())),
                "CopyTargets: a token without a class");
    Tensor table = torch::from_blob(const_cast<int64_t*>(classes.data()), {int64_t(classes.size())},
                                    torch::kInt64);
    ids = table.index_select(0, ids.flatten()).view(ids.sizes()).contiguous();
  }
  const auto in = ids.accessor<int64_t, 2>();
  return TargetsPerRow(ids, [&](int64_t b, auto& out) {
    // the run of `match` tokens starting at each position, once it ends at or before the
    // query -> the latest such start
    std::map<std::vector<int64_t>, int64_t> last;
    for (int64_t t = 0; t + match < ids.size(1); ++t) {
      if (const int64_t s = t - match + 1; s >= 0) last[RunAt(in, b, s, match)] = s;
      if (auto it = last.find(RunAt(in, b, t + 1, match)); it != last.end()) out[b][t] = it->second;
    }
  });
}

Tensor TargetAttentionLoss(const std::vector<AttentionTap>& taps, const Tensor& targets) {
  Tensor has = targets >= 0;
  const int64_t count = has.sum().item<int64_t>();
  if (count == 0) return {};
  Tensor index = targets.clamp_min(0).unsqueeze(-1);  // [B, T, 1]
  Tensor sum;
  for (const AttentionTap& tap : taps) {
    Tensor p = tap.probs.gather(2, index).squeeze(-1);  // [B, T]
    Tensor nll = -(torch::log(p + 1e-9) * has.to(p.scalar_type())).sum() / double(count);
    sum = sum.defined() ? sum + nll : nll;
  }
  return sum / double(taps.size());
}

absl::Status CheckHeads(const Geometry& g, const std::vector<HeadIndex>& heads) {
  for (const HeadIndex& h : heads) {
    if (h.layer >= g.num_layers || h.head >= g.num_heads) {
      return absl::InvalidArgumentError(absl::StrCat("attention head ", h.layer, ".", h.head,
                                                     ": the model has ", g.num_layers,
                                                     " layers of ", g.num_heads, " query heads"));
    }
  }
  return absl::OkStatus();
}

Tensor PreviousTokenLoss(const std::vector<AttentionTap>& taps) {
  Tensor sum;
  for (const AttentionTap& tap : taps) {
    // the weight of key t-1 for every query t >= 1: the first subdiagonal, [B, T-1]
    Tensor nll = -torch::log(tap.probs.diagonal(-1, 1, 2) + 1e-9).mean();
    sum = sum.defined() ? sum + nll : nll;
  }
  return sum / double(taps.size());
}

double HeldoutLoss(const NeedleNet& net, const WeightMap& w, std::span<const int32_t> tokens,
                   int64_t ctx, int32_t bos_id, int64_t max_chunks) {
  torch::NoGradGuard no_grad;
  std::vector<TextChunk> chunks = SplitIntoChunks(tokens.size(), uint32_t(ctx));
  if (max_chunks > 0 && int64_t(chunks.size()) > max_chunks) chunks.resize(size_t(max_chunks));
  double nll = 0;
  size_t count = 0;
  // Chunks of equal length go through in batches; the last (shorter) one alone.
  constexpr size_t kBatch = 8;
  for (size_t first = 0; first < chunks.size();) {
    size_t last = first;
    while (last < chunks.size() && last - first < kBatch && chunks[last].size == chunks[first].size)
      ++last;
    const int64_t n = chunks[first].size;
    // input BOS + chunk[0..n-2], targets chunk[0..n-1]: as a sequence [BOS, chunk...] of n+1
    Tensor seqs = torch::empty({int64_t(last - first), n + 1}, torch::kInt64);
    auto acc = seqs.accessor<int64_t, 2>();
    for (size_t c = first; c < last; ++c) {
      acc[c - first][0] = bos_id;
      for (int64_t t = 0; t < n; ++t) acc[c - first][t + 1] = tokens[chunks[c].begin + size_t(t)];
    }
    // the last token is never an input: logits of the first n positions suffice
    Tensor logits = net.Logits(seqs.narrow(1, 0, n), w);
    Tensor lp = torch::log_softmax(logits.to(torch::kFloat64), -1);
    Tensor target = seqs.narrow(1, 1, n).unsqueeze(-1);
    nll += -lp.gather(2, target).sum().item<double>();
    count += size_t(last - first) * size_t(n);
    first = last;
  }
  return count ? nll / double(count) : NAN;
}

absl::StatusOr<TrainSummary> Train(const NeedleNet& net, const TrainOptions& opt,
                                   std::span<const int32_t> train_tokens,
                                   std::span<const int32_t> heldout_tokens, WeightMap* weights,
                                   const CurveCallback& on_point, WeightMap* pre_qat) {
  if (train_tokens.size() <= size_t(opt.seq)) {
    return absl::InvalidArgumentError(absl::StrCat("the training text has ", train_tokens.size(),
                                                   " tokens; a sequence needs ", opt.seq + 1));
  }
  if (opt.steps <= 0 || opt.batch <= 0 || opt.seq < 2 || opt.qat_steps > opt.steps ||
      opt.warmup >= opt.steps) {
    return absl::InvalidArgumentError(
        "training schedule: need steps > warmup >= 0, steps >= qat_steps, batch > 0, seq >= 2");
  }
  CACT_RETURN_IF_ERROR(CheckHeads(net.geometry(), opt.previous_token_heads));
  CACT_RETURN_IF_ERROR(CheckHeads(net.geometry(), opt.induction_heads));
  CACT_RETURN_IF_ERROR(CheckHeads(net.geometry(), opt.copy_heads));
  // the previous-token heads' taps first, then the induction heads', then the copy heads'
  std::vector<AttentionTap> taps;
  for (const auto* heads : {&opt.previous_token_heads, &opt.induction_heads, &opt.copy_heads})
    for (const HeadIndex& h : *heads) taps.push_back({h.layer, h.head, {}});
  const TapKinds tap_kinds{opt.previous_token_heads.size(), opt.induction_heads.size(),
                           opt.copy_heads.size()};
  // Weight decay on matrices only: decaying norm offsets and gates pulls them toward a
  // value that means nothing special.
  std::vector<Tensor> decayed, plain;
  std::vector<std::string> matrices;
  for (const TensorSpec& s : CanonicalLayout(net.geometry(), {})) {
    if (s.kind == TensorKind::kTokenizer) continue;
    Tensor& t = weights->at(s.name);
    t.requires_grad_(true);
    (s.kind == TensorKind::kMatrix ? decayed : plain).push_back(t);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto adamw = [&](double decay) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(opt.lr);
    o->betas({opt.beta1, opt.beta2}).weight_decay(decay).eps(1e-8);
    return o;
  };
  groups.emplace_back(decayed, adamw(opt.weight_decay));
  groups.emplace_back(plain, adamw(0.0));
  torch::optim::AdamW optimizer(groups, torch::optim::AdamWOptions(opt.lr));
  std::vector<Tensor> all = decayed;
  all.insert(all.end(), plain.begin(), plain.end());

  std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ull + 1);
  TrainSummary summary;
  const double start = Now();
  const int64_t log_every = std::max<int64_t>(1, opt.eval_every / 10);
  double loss_sum = 0, attention_sum = 0;
  int64_t loss_steps = 0;
  for (int64_t step = 0; step < opt.steps; ++step) {
    const bool qat = step >= opt.steps - opt.qat_steps;
    if (qat && pre_qat && pre_qat->empty()) {
      for (const auto& [name, t] : *weights) (*pre_qat)[name] = t.detach().clone();
    }
    const double lr = LearningRate(opt, step);
    for (auto& g : optimizer.param_groups()) g.options().set_lr(lr);
    Tensor batch = SampleBatch(train_tokens, opt, rng);
    optimizer.zero_grad();
    WeightMap used = qat ? FakeQuantized(*weights, opt.qat) : *weights;
    Tensor loss = NextTokenLoss(net.Logits(batch, used, {}, taps.empty() ? nullptr : &taps), batch);
    Tensor total = loss;
    if (!taps.empty()) {
      Tensor attention = AttentionLoss(taps, tap_kinds, opt.copy_classes, batch);
      if (attention.defined()) {
        total = loss + opt.attention_loss_weight * attention;
        attention_sum += attention.item<double>();
      }
    }
    total.backward();
    torch::nn::utils::clip_grad_norm_(all, opt.clip);
    optimizer.step();
    loss_sum += loss.item<double>();
    ++loss_steps;

    const bool last = step + 1 == opt.steps;
    const bool eval = last || (step + 1) % opt.eval_every == 0;
    if (!eval && (step + 1) % log_every != 0) continue;
    CurvePoint p;
    p.step = step + 1;
    p.tokens = (step + 1) * opt.batch * (opt.seq - 1);
    p.lr = lr;
    p.train_loss = loss_sum / double(loss_steps);
    if (!taps.empty()) p.attention_loss = attention_sum / double(loss_steps);
    p.qat = qat;
    if (eval && !heldout_tokens.empty()) {
      WeightMap scored = qat ? FakeQuantized(*weights, opt.qat) : *weights;
      // every curve point on the same chunks, so the curve compares like with like
      p.heldout_loss =
          HeldoutLoss(net, scored, heldout_tokens, opt.seq, opt.bos_id, opt.eval_chunks);
      if (last) {
        summary.final_heldout_loss =
            HeldoutLoss(net, scored, heldout_tokens, opt.seq, opt.bos_id, 0);
      }
    }
    p.seconds = Now() - start;
    loss_sum = attention_sum = 0;
    loss_steps = 0;
    summary.curve.push_back(p);
    if (on_point) on_point(p, opt.steps);
  }
  for (auto& [name, t] : *weights) t = t.detach();
  summary.seconds = Now() - start;
  summary.tokens_per_second =
      double(opt.steps * opt.batch * (opt.seq - 1)) / std::max(summary.seconds, 1e-9);
  return summary;
}

}  // namespace cact::train
