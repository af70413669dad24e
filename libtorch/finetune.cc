#include "libtorch/finetune.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "absl/strings/str_format.h"

namespace cact::train {
namespace {

using torch::Tensor;

constexpr const char* kTargets[] = {"q_proj", "k_proj", "v_proj", "gate_proj", "out_proj"};

struct LoraParam {
  uint32_t layer;
  std::string proj, weight;  // "q_proj", "layer03.q_proj"
  Tensor a, b;               // [r, in], [out, r]
};

// The weights the forward sees: base + scale * B @ A on the targets, fake-quantized if asked.
WeightMap Effective(const NeedleNet& net, const WeightMap& base, const std::vector<LoraParam>& lora,
                    double scale, const FinetuneOptions& opt) {
  WeightMap w = base;
  for (const LoraParam& p : lora) w[p.weight] = base.at(p.weight) + scale * torch::matmul(p.b, p.a);
  return opt.qat ? FakeQuantized(w, opt.widths) : w;
}

// [n, T] ids and masks of the chosen examples.
std::pair<Tensor, Tensor> Batch(const std::vector<EncodedExample>& ex, const size_t* idx,
                                size_t n) {
  const int64_t T = int64_t(ex[idx[0]].ids.size());
  Tensor ids = torch::empty({int64_t(n), T}, torch::kInt64);
  Tensor mask = torch::empty({int64_t(n), T}, torch::kFloat32);
  for (size_t i = 0; i < n; ++i) {
    const EncodedExample& e = ex[idx[i]];
    for (int64_t t = 0; t < T; ++t) {
      ids[int64_t(i)][t] = e.ids[size_t(t)];
      mask[int64_t(i)][t] = e.loss_mask[size_t(t)];
    }
  }
  return {ids, mask};
}

// Mean over examples of the masked target loss (the official validation figure).
double MeanLoss(const NeedleNet& net, const WeightMap& w, const std::vector<EncodedExample>& ex,
                const std::vector<size_t>& idx, int64_t batch) {
  if (idx.empty()) return NAN;
  torch::NoGradGuard no_grad;
  double sum = 0;
  size_t batches = 0;
  for (size_t at = 0; at < idx.size(); at += size_t(batch)) {
    const size_t n = std::min(size_t(batch), idx.size() - at);
    auto [ids, mask] = Batch(ex, idx.data() + at, n);
    sum += NextTokenLoss(net.Logits(ids, w), ids, mask).item<double>();
    ++batches;
  }
  return sum / double(batches);
}

}  // namespace

WeightMap MergeAdapter(const WeightMap& base, const PeftAdapter& adapter) {
  WeightMap w = base;
  const double scale = adapter.alpha / double(adapter.rank);
  for (const PeftLoraPair& p : adapter.pairs) {
    const std::string name = absl::StrFormat("layer%02u.%s", p.layer, p.proj);
    Tensor a = torch::from_blob(const_cast<float*>(p.a.data()), {adapter.rank, p.in}).clone();
    Tensor b = torch::from_blob(const_cast<float*>(p.b.data()), {p.out, adapter.rank}).clone();
    w[name] = base.at(name) + scale * torch::matmul(b, a);
  }
  return w;
}

absl::StatusOr<PeftAdapter> Finetune(const NeedleNet& net, const WeightMap& base_in,
                                     const std::vector<EncodedExample>& examples,
                                     const FinetuneOptions& opt, FinetuneReport* report,
                                     const FinetuneProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  if (examples.size() < 2)
    return absl::InvalidArgumentError("fine-tuning needs at least 2 examples");
  if (opt.rank == 0 || opt.batch <= 0 || opt.epochs <= 0)
    return absl::InvalidArgumentError("fine-tuning: rank, batch and epochs must be positive");
  const Geometry& g = net.geometry();
  WeightMap base;
  for (const auto& [name, t] : base_in) base[name] = t.detach();

  // The split, as the official: a seeded permutation, the first val_split of it held out.
  std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ull + 7);
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const size_t n_val =
      std::min(size_t(double(examples.size()) * opt.val_split), examples.size() - 1);
  std::vector<size_t> val(order.begin(), order.begin() + n_val);
  std::vector<size_t> train(order.begin() + n_val, order.end());

  // A ~ N(0, 1) / rank, B = 0: the merged model starts as the base.
  // A target whose weights are zero in every layer (max |W| <= 1e-6) is left alone, as the
  // official finetune leaves it: nothing there for a low-rank update to adjust.
  std::vector<const char*> targets;
  for (const char* proj : kTargets) {
    double max_abs = 0;
    for (uint32_t l = 0; l < g.num_layers; ++l)
      max_abs = std::max(
          max_abs, base.at(absl::StrFormat("layer%02u.%s", l, proj)).abs().max().item<double>());
    if (max_abs > kDeadTargetMaxAbs)
      targets.push_back(proj);
    else
      report->skipped_targets.push_back(proj);
  }
  if (targets.empty())
    return absl::InvalidArgumentError(
        "fine-tuning: every LoRA target (q/k/v/gate/out_proj) is zero in every layer");
  torch::manual_seed(opt.seed);
  std::vector<LoraParam> lora;
  std::vector<Tensor> params;
  for (uint32_t l = 0; l < g.num_layers; ++l) {
    for (const char* proj : targets) {
      LoraParam p;
      p.layer = l;
      p.proj = proj;
      p.weight = absl::StrFormat("layer%02u.%s", l, proj);
      const Tensor& w = base.at(p.weight);
      p.a = (torch::randn({int64_t(opt.rank), w.size(1)}) / double(opt.rank)).requires_grad_(true);
      p.b = torch::zeros({w.size(0), int64_t(opt.rank)}).requires_grad_(true);
      params.push_back(p.a);
      params.push_back(p.b);
      lora.push_back(std::move(p));
    }
  }
  const double scale = opt.alpha / double(opt.rank);
  torch::optim::AdamW optimizer(
      params,
      torch::optim::AdamWOptions(opt.lr).weight_decay(opt.weight_decay).betas({0.9, 0.999}));

  const int64_t per_epoch = int64_t((train.size() + size_t(opt.batch) - 1) / size_t(opt.batch));
  const int64_t total = opt.epochs * per_epoch;
  const int64_t warmup =
      std::max<int64_t>(0, std::min(std::max<int64_t>(1, total / 20), total - 1));
  auto lr_at = [&](int64_t step) {
    if (step < warmup) return opt.lr * double(step) / double(warmup);
    const double progress = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
    return 0.5 * opt.lr * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
  };
  report->train_examples = train.size();
  report->val_examples = val.size();
  report->steps = total;
  report->max_len = int64_t(examples[0].ids.size());
  report->val_loss_before =
      MeanLoss(net, Effective(net, base, lora, scale, opt), examples, val, opt.batch);

  int64_t step = 0;
  const int64_t every = std::max<int64_t>(1, total / 50);
  for (int64_t epoch = 0; epoch < opt.epochs; ++epoch) {
    std::shuffle(train.begin(), train.end(), rng);
    double last = 0;
    for (size_t at = 0; at < train.size(); at += size_t(opt.batch), ++step) {
      for (auto& group : optimizer.param_groups()) group.options().set_lr(lr_at(step));
      const size_t n = std::min(size_t(opt.batch), train.size() - at);
      auto [ids, mask] = Batch(examples, train.data() + at, n);
      optimizer.zero_grad();
      Tensor loss =
          NextTokenLoss(net.Logits(ids, Effective(net, base, lora, scale, opt)), ids, mask);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(params, opt.clip);
      optimizer.step();
      last = loss.item<double>();
      if (progress && ((step + 1) % every == 0 || step + 1 == total))
        progress(step + 1, total, last);
    }
    report->epoch_train_loss.push_back(last);
    report->epoch_val_loss.push_back(
        MeanLoss(net, Effective(net, base, lora, scale, opt), examples, val, opt.batch));
  }
  report->val_loss_after = report->epoch_val_loss.back();
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  PeftAdapter out;
  out.rank = opt.rank;
  out.alpha = opt.alpha;
  for (const LoraParam& p : lora) {
    PeftLoraPair pair;
    pair.layer = p.layer;
    pair.proj = p.proj;
    Tensor a = p.a.detach().contiguous(), b = p.b.detach().contiguous();
    pair.in = uint32_t(a.size(1));
    pair.out = uint32_t(b.size(0));
    pair.a.assign(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
    pair.b.assign(b.data_ptr<float>(), b.data_ptr<float>() + b.numel());
    out.pairs.push_back(std::move(pair));
  }
  return out;
}

}  // namespace cact::train
