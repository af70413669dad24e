#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace cact {

// The lowest index of the largest value; NaNs never win, except a NaN at index 0, which
// nothing beats (the plain loop `if (x[i] > x[best]) best = i`). Two passes that vectorise:
// the maximum in 16 independent lanes, then the first index holding it, 16 at a time.
int32_t Argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0) return 0;
  const float* x = logits.data();
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  for (size_t j = 0; j < kLanes; ++j) lane[j] = x[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float best = x[0];
  for (size_t j = 0; j < kLanes; ++j) best = lane[j] > best ? lane[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (i = 0; i + kLanes <= n; i += kLanes) {
    bool any = false;
    for (size_t j = 0; j < kLanes; ++j) any |= x[i + j] == best;
    if (any) break;
  }
  for (; i < n; ++i)
    if (x[i] == best) return int32_t(i);
  return 0;  // best is NaN: x[0] is
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (logits.empty()) return 0;
  if (opt_.temperature <= 0.0f) return Argmax(logits);

  // Candidates by decreasing logit (lower id first on ties), cut to top-k.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = order.size();
  if (opt_.top_k > 0 && size_t(opt_.top_k) < keep) {
    keep = size_t(opt_.top_k);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), higher);
  } else {
    std::sort(order.begin(), order.end(), higher);
  }
  order.resize(keep);

  // Softmax of logits / temperature over the candidates (double for the tail).
  std::vector<double> p(keep);
  const double mx = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i)
    sum += p[i] = std::exp((logits[order[i]] - mx) / opt_.temperature);
  for (double& v : p) v /= sum;

  // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
  if (opt_.top_p < 1.0f) {
    double mass = 0;
    size_t n = 0;
    while (n < keep && (n == 0 || mass < opt_.top_p)) mass += p[n++];
    keep = n;
    for (size_t i = 0; i < keep; ++i) p[i] /= mass;
  }

  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double cdf = 0;
  for (size_t i = 0; i < keep; ++i) {
    cdf += p[i];
    if (u < cdf) return order[i];
  }
  return order[keep - 1];
}

}  // namespace cact
