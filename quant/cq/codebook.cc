// Lloyd-Max codebooks, reproducing the exporter's numpy computation step by step:
// sorted RandomState(0).randn(400000), quantile start, 200 Lloyd iterations in float64 with
// numpy's summation order for the means, then float32(c / sqrt(group)).
#include "quant/cq/codebook.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>

#include "quant/cq/numpy_random.h"
#include "quant/cq/numpy_sum.h"

namespace cact {
namespace {

constexpr size_t kSamples = 400000;
constexpr int kIterations = 200;

const std::vector<double>& SortedSamples() {
  static const std::vector<double> samples = [] {
    NumpyRandomState rs(0);
    std::vector<double> x(kSamples);
    for (double& v : x) v = rs.StandardNormal();
    std::sort(x.begin(), x.end());
    return x;
  }();
  return samples;
}

std::vector<double> ComputeLloydMax(size_t levels) {
  const std::vector<double>& x = SortedSamples();
  std::vector<double> c(levels);
  for (size_t k = 0; k < levels; ++k)
    c[k] = x[size_t((double(k) + 0.5) / double(levels) * double(kSamples))];

  // x is sorted and searchsorted(bnd, x) (left) puts x in cell k when
  // bnd[k-1] < x <= bnd[k], so every cell is a contiguous run [start, end) of x.
  // The means of ordered disjoint runs are ordered, so the boundaries stay sorted.
  std::vector<size_t> start(levels), end(levels), prev_start, prev_end;
  for (int it = 0; it < kIterations; ++it) {
    for (size_t k = 0; k < levels; ++k) {
      start[k] = k == 0 ? 0 : end[k - 1];
      if (k + 1 == levels) {
        end[k] = kSamples;
      } else {
        double bnd = (c[k] + c[k + 1]) / 2.0;
        end[k] = size_t(std::upper_bound(x.begin() + start[k], x.end(), bnd) - x.begin());
      }
    }
    // Same cells as the previous iteration: the centres are a fixed point, and the
    // remaining iterations would reproduce them exactly.
    if (start == prev_start && end == prev_end) break;
    for (size_t k = 0; k < levels; ++k) {
      size_t n = end[k] - start[k];
      if (n > 0) c[k] = NumpyReduceSum(x.data() + start[k], n) / double(n);
    }
    prev_start = start;
    prev_end = end;
  }
  std::sort(c.begin(), c.end());
  return c;
}

}  // namespace

const std::vector<double>& UnitLloydMax(uint32_t bits) {
  static std::array<std::vector<double>, 5> cache;
  static std::array<std::once_flag, 5> once;
  const CqType* type = FindCqType(bits);
  if (!type || type->ternary) {
    static const std::vector<double> none;
    return none;
  }
  std::call_once(once[bits], [type] { cache[type->bits] = ComputeLloydMax(type->levels); });
  return cache[bits];
}

const std::vector<double>& UnitCodebook(uint32_t bits) {
  static const std::vector<double> ternary = {-kTernaryLevel, 0.0, kTernaryLevel};
  const CqType* type = FindCqType(bits);
  return type && type->ternary ? ternary : UnitLloydMax(bits);
}

std::vector<float> CqCodebook(uint32_t bits, uint32_t group) {
  const std::vector<double>& unit = UnitCodebook(bits);
  std::vector<float> out(unit.size());
  for (size_t i = 0; i < unit.size(); ++i) out[i] = ScaleUnitLevel(unit[i], group);
  return out;
}

std::vector<float> HeaderCodebook(uint32_t group) {
  std::vector<float> out;
  for (const CqType& t : kCqTypes) {
    if (t.codebook_offset < 0) continue;  // analytic, not stored
    std::vector<float> cb = CqCodebook(t.bits, group);
    out.insert(out.end(), cb.begin(), cb.end());
  }
  return out;
}

}  // namespace cact
