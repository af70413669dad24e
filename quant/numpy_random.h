// numpy.random.RandomState, legacy: MT19937 seeded with init_genrand(seed), random_sample()
// doubles (53-bit), and the polar Box-Muller `gauss` with its cached second value.
// Bit-exact with numpy so Lloyd-Max codebooks reproduce the exporter's.
#pragma once
#include <cstdint>
#include <random>

namespace cact {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed);
  uint32_t NextU32();
  double RandomSample();    // [0, 1)
  double StandardNormal();  // legacy gauss
 private:
  std::mt19937 mt_;
  bool has_gauss_ = false;
  double gauss_ = 0;
};

}  // namespace cact
