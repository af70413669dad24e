// numpy.random.RandomState, legacy: MT19937 seeded with init_genrand(seed), random_sample()
// doubles (53-bit), and the polar Box-Muller `gauss` with its cached second value.
// Bit-exact with numpy so Lloyd-Max codebooks reproduce the exporter's.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace cact {

// The polar Box-Muller method (Marsaglia) as numpy's legacy gauss computes it: draws pairs
// from `uniform01` (doubles in [0, 1)) until one falls inside the unit circle, and returns
// the two standard normals it gives, {f * x1, f * x2}. Which one a caller returns first and
// which it keeps for later is the caller's stream order.
template <typename Uniform01>
std::pair<double, double> PolarNormalPair(Uniform01&& uniform01) {
  double x1, x2, r2;
  do {
    x1 = 2.0 * uniform01() - 1.0;
    x2 = 2.0 * uniform01() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  return {f * x1, f * x2};
}

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
