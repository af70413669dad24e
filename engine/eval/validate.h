// Agreement between two forward paths (normally the FP32 reference and the fast int8
// path) on the same tokens, llama-perplexity --kl-divergence style: per-layer relative L2
// of the hidden state, and for the logits relative L2, top-1 agreement and the KL
// divergence KL(P_reference || P_candidate) per position (mean, 99th percentile, max).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/forward.h"

namespace cact {

struct ValidateThresholds {
  double max_logits_rel_l2 = 0.005;  // the fast path's accuracy contract: <= 0.5 %
  double min_top1 = 0.99;            // and >= 99 % top-1 agreement
  double max_kl_mean = 0.01;         // nats; generous sanity bounds (0.5 % logit error
  double max_kl_max = 0.1;           // gives KL ~1e-4)
};

struct ValidationReport {
  std::string reference_name, candidate_name;
  uint32_t prompt_tokens = 0, decode_steps = 0, positions = 0;
  std::vector<double> layer_rel_l2;  // empty when a path kept no hidden states
  double logits_rel_l2 = 0;          // over all positions
  double logits_rel_l2_max = 0;      // worst single position
  double top1_agreement = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;
  std::vector<std::string> failures;  // thresholds passed
  bool ok() const { return failures.empty(); }
  std::string ToText() const;
  std::string ToJson() const;
};

// Feeds `prompt` to both (one prefill call each, all positions compared), then
// `decode_steps` tokens one at a time, each the reference's greedy choice. Both forwards
// are Reset() first; build them with keep_hidden for the per-layer figures
// (`num_layers` splits hidden() = [L][T][d]). Decoding stops early at max_seq_len.
absl::StatusOr<ValidationReport> ValidateForwards(Forward& reference, Forward& candidate,
                                                  std::span<const int32_t> prompt,
                                                  uint32_t decode_steps, uint32_t num_layers,
                                                  const ValidateThresholds& thresholds = {});

// Helpers, exposed for tests.
double RelativeL2(std::span<const float> a, std::span<const float> ref);
// KL(softmax(p) || softmax(q)) in double.
double KlDivergence(std::span<const float> p_logits, std::span<const float> q_logits);

}  // namespace cact
