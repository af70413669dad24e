#include "engine/eval/validate.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "engine/sampler.h"

namespace cact {

double RelativeL2(std::span<const float> a, std::span<const float> ref) {
  double num = 0, den = 0;
  const size_t n = std::min(a.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return std::sqrt(num / den);
}

namespace {
std::vector<double> LogSoftmax(std::span<const float> x) {
  double mx = -INFINITY;
  for (float v : x) mx = std::max(mx, double(v));
  double s = 0;
  for (float v : x) s += std::exp(double(v) - mx);
  const double lse = mx + std::log(s);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) - lse;
  return out;
}
}  // namespace

double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  const std::vector<double> lp = LogSoftmax(p_logits), lq = LogSoftmax(q_logits);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return std::max(kl, 0.0);
}

absl::StatusOr<ValidationReport> ValidateForwards(Forward& reference, Forward& candidate,
                                                  std::span<const int32_t> prompt,
                                                  uint32_t decode_steps, uint32_t num_layers,
                                                  const ValidateThresholds& th) {
  if (prompt.empty()) return absl::InvalidArgumentError("validate: no tokens to feed");
  ValidationReport r;
  r.reference_name = reference.name();
  r.candidate_name = candidate.name();
  reference.Reset();
  candidate.Reset();

  std::vector<float> ref_all, cand_all, ref_step, cand_step;
  if (auto st = reference.Feed(prompt, &ref_all, true); !st.ok()) return st;
  if (auto st = candidate.Feed(prompt, &cand_all, true); !st.ok()) return st;
  if (ref_all.size() != cand_all.size() || ref_all.size() % prompt.size())
    return absl::InternalError("validate: the two paths returned different logits shapes");
  const size_t V = ref_all.size() / prompt.size();
  r.prompt_tokens = uint32_t(prompt.size());

  for (uint32_t s = 0; s < decode_steps; ++s) {
    const int32_t next = Argmax(std::span<const float>(ref_all).last(V));
    const int32_t tok[1] = {next};
    if (auto st = reference.Feed(tok, &ref_step, false); !st.ok()) {
      if (st.code() == absl::StatusCode::kOutOfRange) break;  // max_seq_len reached
      return st;
    }
    if (auto st = candidate.Feed(tok, &cand_step, false); !st.ok()) return st;
    ref_all.insert(ref_all.end(), ref_step.begin(), ref_step.end());
    cand_all.insert(cand_all.end(), cand_step.begin(), cand_step.end());
    ++r.decode_steps;
  }
  const size_t T = ref_all.size() / V;
  r.positions = uint32_t(T);

  // Logits: global relative L2, worst position, top-1 agreement, KL distribution.
  r.logits_rel_l2 = RelativeL2(cand_all, ref_all);
  std::vector<double> kl(T);
  size_t agree = 0;
  for (size_t t = 0; t < T; ++t) {
    std::span<const float> a(&ref_all[t * V], V), b(&cand_all[t * V], V);
    r.logits_rel_l2_max = std::max(r.logits_rel_l2_max, RelativeL2(b, a));
    agree += Argmax(a) == Argmax(b);
    kl[t] = KlDivergence(a, b);
  }
  r.top1_agreement = double(agree) / double(T);
  double sum = 0;
  for (double v : kl) sum += v;
  r.kl_mean = sum / double(T);
  std::vector<double> sorted = kl;
  // NaN sorts last, so a NaN divergence is the maximum (and fails the bound).
  std::sort(sorted.begin(), sorted.end(), [](double a, double b) {
    return std::isnan(b) ? !std::isnan(a) : a < b;
  });
  r.kl_max = sorted.back();
  r.kl_p99 = sorted[std::min(T - 1, size_t(std::ceil(0.99 * double(T))) - 1)];

  // Hidden states: [L][T][d] from both, per-layer relative L2 over all positions.
  const std::vector<float>& hr = reference.hidden();
  const std::vector<float>& hc = candidate.hidden();
  const size_t L = num_layers;
  if (L && !hr.empty() && hr.size() == hc.size() && hr.size() % (L * T) == 0) {
    const size_t per_layer = hr.size() / L;
    for (size_t l = 0; l < L; ++l)
      r.layer_rel_l2.push_back(RelativeL2(std::span<const float>(&hc[l * per_layer], per_layer),
                                          std::span<const float>(&hr[l * per_layer], per_layer)));
  }

  // Every comparison is written so that a NaN fails it: a non-finite metric never passes.
  for (size_t l = 0; l < r.layer_rel_l2.size(); ++l)
    if (!std::isfinite(r.layer_rel_l2[l]))
      r.failures.push_back(absl::StrFormat("layer %d hidden relative L2 is %g (not finite)", l,
                                           r.layer_rel_l2[l]));
  if (!(r.logits_rel_l2 <= th.max_logits_rel_l2))
    r.failures.push_back(
        absl::StrFormat("logits relative L2 %.3g > %.3g", r.logits_rel_l2, th.max_logits_rel_l2));
  if (!(r.top1_agreement >= th.min_top1))
    r.failures.push_back(
        absl::StrFormat("top-1 agreement %.4f < %.4f", r.top1_agreement, th.min_top1));
  if (!(r.kl_mean <= th.max_kl_mean))
    r.failures.push_back(absl::StrFormat("KL mean %.3g > %.3g", r.kl_mean, th.max_kl_mean));
  if (!(r.kl_max <= th.max_kl_max))
    r.failures.push_back(absl::StrFormat("KL max %.3g > %.3g", r.kl_max, th.max_kl_max));
  return r;
}

std::string ValidationReport::ToText() const {
  std::string out =
      absl::StrFormat("validate: %s vs %s, %d prompt tokens + %d decode steps = %d positions\n",
                      candidate_name, reference_name, prompt_tokens, decode_steps, positions);
  for (size_t l = 0; l < layer_rel_l2.size(); ++l)
    out += absl::StrFormat("  layer %2d hidden rel-L2 %.3e\n", l, layer_rel_l2[l]);
  out += absl::StrFormat("  logits rel-L2 %.3e (worst position %.3e)\n", logits_rel_l2,
                         logits_rel_l2_max);
  out += absl::StrFormat("  top-1 agreement %.2f %%\n", 100.0 * top1_agreement);
  out +=
      absl::StrFormat("  KL divergence mean %.3e  p99 %.3e  max %.3e\n", kl_mean, kl_p99, kl_max);
  if (ok()) out += "  PASS\n";
  for (const std::string& f : failures) out += "  FAIL: " + f + "\n";
  return out;
}

std::string ValidationReport::ToJson() const {
  nlohmann::ordered_json j;
  j["reference"] = reference_name;
  j["candidate"] = candidate_name;
  j["prompt_tokens"] = prompt_tokens;
  j["decode_steps"] = decode_steps;
  j["positions"] = positions;
  j["layer_hidden_rel_l2"] = layer_rel_l2;
  j["logits_rel_l2"] = logits_rel_l2;
  j["logits_rel_l2_worst_position"] = logits_rel_l2_max;
  j["top1_agreement"] = top1_agreement;
  j["kl_mean"] = kl_mean;
  j["kl_p99"] = kl_p99;
  j["kl_max"] = kl_max;
  j["pass"] = ok();
  j["failures"] = failures;
  return j.dump();
}

}  // namespace cact
