#include "quant/cq/fwht.h"

#include <cmath>

namespace cact {

void FwhtUnnormalized(float* x, size_t n) {
  for (size_t h = 1; h < n; h <<= 1) {
    for (size_t i = 0; i < n; i += 2 * h) {
      for (size_t j = i; j < i + h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

void FwhtOrthonormal(float* x, size_t n) {
  FwhtUnnormalized(x, n);
  const float s = HadamardScale(n);
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

float HadamardScale(size_t n) {
  // The official dense matrix is float32(+-1) / float32(sqrt(n)) (numpy keeps float32
  // when dividing a float32 array by a scalar), so its entries are this value.
  return 1.0f / float(std::sqrt(double(n)));
}

}  // namespace cact
