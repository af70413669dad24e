// numpy's legacy RandomState: std::mt19937 is seeded by the same init_genrand recurrence
// numpy uses for an integer seed, so the u32 streams are identical.
#include "quant/cq/numpy_random.h"

namespace cact {

NumpyRandomState::NumpyRandomState(uint32_t seed) : mt_(seed) {}

uint32_t NumpyRandomState::NextU32() { return uint32_t(mt_()); }

double NumpyRandomState::RandomSample() {
  // 27 + 26 bits, as numpy's random_standard_uniform / legacy_double.
  uint32_t a = NextU32() >> 5, b = NextU32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyRandomState::StandardNormal() {
  if (has_gauss_) {
    has_gauss_ = false;
    double cached = gauss_;
    gauss_ = 0;
    return cached;
  }
  // numpy returns the second value and keeps the first for the next call.
  const auto [first, second] = PolarNormalPair([this] { return RandomSample(); });
  gauss_ = first;
  has_gauss_ = true;
  return second;
}

}  // namespace cact
