// The perplexity and compare reports as text (the layout of llama-perplexity's final
// estimate and KL-divergence sections) and as JSON.
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "engine/eval/perplexity.h"

namespace cact {
namespace {

std::string RunLine(const ScoringRun& r) {
  return absl::StrFormat(
      "%s path, ctx %d, window %d%s; %d tokens scored in %.2f s (%.0f tokens/s, %d worker%s x "
      "%d thread%s)",
      r.other_path_name.empty() || r.other_path_name == r.path_name
          ? r.path_name
          : absl::StrFormat("base on the %s path, other on the %s", r.path_name, r.other_path_name),
      r.ctx, r.window, r.sink ? absl::StrFormat(" (sink %d)", r.sink) : "",
      r.tokens_scored, r.seconds, r.tokens_per_s(), r.workers, r.workers == 1 ? "" : "s",
      r.threads_per_worker, r.threads_per_worker == 1 ? "" : "s");
}

nlohmann::ordered_json RunJson(const ScoringRun& r) {
  nlohmann::ordered_json j = {{"path", r.path_name},
          {"ctx", r.ctx},
          {"window", r.window},
          {"sink", r.sink},
          {"workers", r.workers},
          {"threads_per_worker", r.threads_per_worker},
          {"text_bytes", r.text_bytes},
          {"text_tokens", r.text_tokens},
          {"tokens_scored", r.tokens_scored},
          {"chunks", r.chunks},
          {"seconds", r.seconds},
          {"tokens_per_s", r.tokens_per_s()}};
  if (!r.other_path_name.empty()) j["other_path"] = r.other_path_name;
  return j;
}

void AddQuantiles(nlohmann::ordered_json& j, const std::string& prefix, const Quantiles& q) {
  j[prefix + "_min"] = q.min;
  j[prefix + "_p01"] = q.p01;
  j[prefix + "_p05"] = q.p05;
  j[prefix + "_p10"] = q.p10;
  j[prefix + "_median"] = q.median;
  j[prefix + "_p90"] = q.p90;
  j[prefix + "_p95"] = q.p95;
  j[prefix + "_p99"] = q.p99;
  j[prefix + "_p999"] = q.p999;
  j[prefix + "_max"] = q.max;
}

// Six decimals, or three significant digits in scientific notation below 1e-3 (a KLD of
// 3e-7 must not print as 0).
std::string Small(double v) {
  return v == 0 || std::abs(v) >= 1e-3 ? absl::StrFormat("%10.6f", v)
                                       : absl::StrFormat("%10.3e", v);
}

// "label: value" rows of one statistics section, the values in `format`.
std::string QuantileRows(const char* name, const Quantiles& q, double scale, const char* unit) {
  const std::pair<const char*, double> rows[] = {
      {"Maximum", q.max}, {"99.9%  ", q.p999}, {"99.0%  ", q.p99},   {"95.0%  ", q.p95},
      {"90.0%  ", q.p90}, {"Median ", q.median}, {"10.0%  ", q.p10}, {" 5.0%  ", q.p05},
      {" 1.0%  ", q.p01}, {"Minimum", q.min}};
  std::string s;
  for (const auto& [label, v] : rows)
    s += absl::StrFormat("%s %s: %s%s\n", label, name, Small(v * scale), unit);
  return s;
}

}  // namespace

std::string PerplexityReport::ToText() const {
  std::string s = absl::StrFormat("perplexity of %s\n  %s\n", model_path, RunLine(run));
  s += absl::StrFormat("  text: %d bytes, %d tokens, %d chunks of at most %d tokens\n",
                       run.text_bytes, run.text_tokens, run.chunks, run.ctx - 1);
  s += absl::StrFormat("  mean NLL %.6f ± %.6f nats/token\n", nll.mean, nll.error);
  s += absl::StrFormat("Final estimate: PPL = %s +/- %s\n", FormatPerplexity(ppl),
                       FormatPerplexity(ppl_stderr));
  return s;
}

std::string PerplexityReport::ToJson() const {
  nlohmann::ordered_json j = {{"model", model_path},
                      {"ppl", ppl},
                      {"ppl_error", ppl_stderr},
                      {"nll_mean", nll.mean},
                      {"nll_error", nll.error}};
  j.update(RunJson(run));
  nlohmann::ordered_json per_chunk = nlohmann::ordered_json::array();
  for (const ChunkPerplexity& c : chunks)
    per_chunk.push_back(
        {{"begin", c.begin}, {"tokens", c.tokens}, {"nll_sum", c.nll_sum}, {"ppl", c.ppl()}});
  j["per_chunk"] = std::move(per_chunk);
  return j.dump(2);
}

std::string CompareReport::ToText() const {
  std::string s = absl::StrFormat("compare: base  %s\n         other %s\n  %s\n", base_path,
                                  other_path, RunLine(run));
  const double ratio = std::exp(ln_ppl_ratio.mean);
  s += "\n====== Perplexity statistics ======\n";
  s += absl::StrFormat("Mean PPL(other)                     : %s ± %s\n",
                       FormatPerplexity(ppl_other), FormatPerplexity(ppl_other * nll_other.error));
  s += absl::StrFormat("Mean PPL(base)                      : %s ± %s\n",
                       FormatPerplexity(ppl_base), FormatPerplexity(ppl_base * nll_base.error));
  s += absl::StrFormat("Cor(ln(PPL(other)), ln(PPL(base))) : %6.2f%%\n", 100 * nll_correlation);
  s += absl::StrFormat("Mean ln(PPL(other)/PPL(base))       : %10.6f ± %10.6f\n",
                       ln_ppl_ratio.mean, ln_ppl_ratio.error);
  s += absl::StrFormat("Mean PPL(other)/PPL(base)           : %10.6f ± %10.6f\n", ratio,
                       ratio * ln_ppl_ratio.error);
  s += absl::StrFormat("Mean PPL(other)-PPL(base)           : %s\n",
                       FormatPerplexity(ppl_other - ppl_base));
  s += "\n====== KL divergence statistics ======\n";
  s += absl::StrFormat("Mean    KLD: %s ± %s\n", Small(kld.mean), Small(kld.error));
  s += QuantileRows("KLD", kld_q, 1, "");
  s += "\n====== Token probability statistics ======\n";
  s += absl::StrFormat("Mean    Δp: %s ± %s %%\n", Small(100 * delta_p.mean),
                       Small(100 * delta_p.error));
  s += QuantileRows("Δp", delta_p_q, 100, " %");
  s += absl::StrFormat("RMS Δp    : %s %%\n", Small(100 * delta_p_rms));
  s += absl::StrFormat("Same top p: %10.3f ± %.3f %%\n", 100 * top1_agreement.mean,
                       100 * top1_agreement.error);
  return s;
}

std::string CompareReport::ToJson() const {
  nlohmann::ordered_json j = {{"base", base_path},
                      {"other", other_path},
                      {"ppl_base", ppl_base},
                      {"ppl_base_error", ppl_base * nll_base.error},
                      {"ppl_other", ppl_other},
                      {"ppl_other_error", ppl_other * nll_other.error},
                      {"nll_base_mean", nll_base.mean},
                      {"nll_other_mean", nll_other.mean},
                      {"ln_ppl_ratio", ln_ppl_ratio.mean},
                      {"ln_ppl_ratio_error", ln_ppl_ratio.error},
                      {"nll_correlation", nll_correlation},
                      {"kld_mean", kld.mean},
                      {"kld_mean_error", kld.error},
                      {"delta_p_mean", delta_p.mean},
                      {"delta_p_mean_error", delta_p.error},
                      {"delta_p_rms", delta_p_rms},
                      {"top1_agreement", top1_agreement.mean},
                      {"top1_agreement_error", top1_agreement.error}};
  AddQuantiles(j, "kld", kld_q);
  AddQuantiles(j, "delta_p", delta_p_q);
  j.update(RunJson(run));
  return j.dump(2);
}

}  // namespace cact
