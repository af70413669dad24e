// numpy's float summation order, needed wherever a result must match numpy bit for bit
// (Lloyd-Max means, CQ group norms).
#pragma once
#include <algorithm>
#include <cstddef>

namespace cact {

// numpy's pairwise_sum for one inner-loop call: fewer than 8 values are added in order;
// up to 128 use 8 interleaved accumulators combined as ((0+1)+(2+3))+((4+5)+(6+7)) plus
// the leftover tail; longer runs split in two halves (first half a multiple of 8).
template <class T>
T NumpyPairwiseSum(const T* a, size_t n) {
  if (n < 8) {
    T res{};
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return NumpyPairwiseSum(a, n2) + NumpyPairwiseSum(a + n2, n - n2);
}

// np.add.reduce over a contiguous 1-D array: the reduction iterator hands the inner loop
// buffers of at most 8192 elements, each summed pairwise, accumulated in order from 0.
template <class T>
T NumpyReduceSum(const T* a, size_t n) {
  constexpr size_t kBuffer = 8192;
  T acc{};
  for (size_t off = 0; off < n; off += kBuffer)
    acc += NumpyPairwiseSum(a + off, std::min(kBuffer, n - off));
  return acc;
}

}  // namespace cact
