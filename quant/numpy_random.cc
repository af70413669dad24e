// numpy's legacy RandomState: std::mt19937 is seeded by the same init_genrand recurrence
// numpy uses for an integer seed, so the u32 streams are identical.
#include "quant/numpy_random.h"

#include <cmath>

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
  double x1, x2, r2;
  do {
    x1 = 2.0 * RandomSample() - 1.0;
    x2 = 2.0 * RandomSample() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  // Polar Box-Muller: returns one value and keeps the other for the next call.
  double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

}  // namespace cact
