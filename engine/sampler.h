// Next-token choice: greedy by default (argmax, lowest id on ties); with a temperature > 0,
// softmax sampling restricted by top-k and top-p (nucleus), from a seeded generator so a
// run is reproducible.
#pragma once
#include <cstdint>
#include <random>
#include <span>

namespace cact {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 0;             // 0: no limit
  float top_p = 1.0f;        // 1: no limit
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options = {}) : opt_(options), rng_(options.seed) {}
  int32_t Sample(std::span<const float> logits);
  const SamplerOptions& options() const { return opt_; }

 private:
  SamplerOptions opt_;
  std::mt19937_64 rng_;
};

int32_t Argmax(std::span<const float> logits);

}  // namespace cact
