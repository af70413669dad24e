// Portable scalar kernels: the oracle every SIMD kernel must match exactly. Written for
// clarity: unpack codes one at a time, integer dot products, the float accumulation order
// documented in cq_kernels.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/half.h"
#include "engine/kernels/kernel_table.h"

namespace cact::kernels::internal {
namespace {

// Code k of a row as stored (ternary: the crumb 0..3).
inline uint32_t CodeAt(const uint8_t* row, uint32_t k, uint32_t code_bits) {
  switch (code_bits) {
    case 2: return (row[k >> 2] >> (2 * (k & 3))) & 3u;
    case 4: return (row[k >> 1] >> (4 * (k & 1))) & 15u;
    default: {  // 3 bits: may straddle two bytes
      uint32_t bit = 3 * k, byte = bit >> 3, shift = bit & 7;
      uint32_t v = row[byte];
      if (shift > 5) v |= uint32_t(row[byte + 1]) << 8;
      return (v >> shift) & 7u;
    }
  }
}

// One group of the orthonormal FWHT's unnormalised butterflies, levels h = 1, 2, 4, ...
// (every kernel uses this order, so the floats are identical).
void FwhtButterflies(float* v, uint32_t n) {
  for (uint32_t h = 1; h < n; h <<= 1)
    for (uint32_t i = 0; i < n; i += 2 * h)
      for (uint32_t j = i; j < i + h; ++j) {
        float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

void Prepare(const float* x, ActivationBatch* a, uint32_t t) {
  const uint32_t n = a->group(), in = a->in();
  int8_t* q = a->mutable_natural(t);
  float* scale = a->mutable_scale(t);
  int32_t* sum = a->mutable_sum(t);
  const float factor = ActScaleFactor(n);
  float u[512];
  for (uint32_t g = 0; g < a->groups(); ++g) {
    uint32_t base = g * n;
    for (uint32_t i = 0; i < n; ++i) u[i] = base + i < in ? x[base + i] : 0.f;
    FwhtButterflies(u, n);
    float amax = 0.f;
    bool finite = true;
    for (uint32_t i = 0; i < n; ++i) {
      float m = std::fabs(u[i]);
      if (!(m <= std::numeric_limits<float>::max())) finite = false;
      amax = m > amax ? m : amax;
    }
    int32_t s = 0;
    if (!finite || amax == 0.f) {
      for (uint32_t i = 0; i < n; ++i) q[base + i] = 0;
      scale[g] = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
    } else {
      float inv = 127.f / amax;
      for (uint32_t i = 0; i < n; ++i) {
        float r = std::nearbyint(u[i] * inv);
        r = std::min(127.f, std::max(-127.f, r));
        q[base + i] = int8_t(r);
        s += int32_t(r);
      }
      scale[g] = amax * factor;
    }
    sum[g] = s;
  }
  for (uint32_t k = a->in_pad(); k % 64; ++k) q[k] = 0;
  BuildPermutedLayoutsScalar(a, t);
}

int32_t GroupDot(const CqKernelMatrix& m, const uint8_t* row, uint32_t g, const int8_t* q) {
  const Int8Codebook& cb = m.codebook();
  int32_t d = 0;
  for (uint32_t k = g * m.group(); k < (g + 1) * m.group(); ++k)
    d += int32_t(cb.value[CodeAt(row, k, m.code_bits())]) * q[k];
  return d;
}

float Accumulate(const CqKernelMatrix& m, uint32_t r, const int32_t* dots, const float* gs) {
  float acc = 0.f;
  for (uint32_t g = 0; g < m.groups(); ++g) {
    float s = HalfBitsToFloat(LoadHalfBits(m.norms() + (size_t(r) * m.groups() + g) * 2)) * gs[g];
    acc = std::fma(s, float(dots[g]), acc);
  }
  return acc;
}

void GroupDotsScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                     uint32_t row_begin, uint32_t row_end, int32_t* dots) {
  for (uint32_t r = row_begin; r < row_end; ++r)
    for (uint32_t g = 0; g < m.groups(); ++g)
      dots[size_t(r - row_begin) * m.groups() + g] =
          GroupDot(m, m.codes() + r * m.row_bytes(), g, a.natural(t));
}

void MatVecScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                  uint32_t row_begin, uint32_t row_end, float* y) {
  std::vector<float> gs(m.groups());
  GroupScales(a, t, m.codebook().scale, gs.data());
  std::vector<int32_t> dots(m.groups());
  for (uint32_t r = row_begin; r < row_end; ++r) {
    GroupDotsScalar(m, a, t, r, r + 1, dots.data());
    y[r] = Accumulate(m, r, dots.data(), gs.data());
  }
}

// Unpacks each row once into int8 codebook values and reuses it for every token.
void MatMatScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                  uint32_t row_end, float* y, size_t y_stride) {
  const uint32_t G = m.groups(), n = m.group();
  std::vector<float> gs(size_t(a.tokens()) * G);
  for (uint32_t t = 0; t < a.tokens(); ++t)
    GroupScales(a, t, m.codebook().scale, gs.data() + size_t(t) * G);
  std::vector<int8_t> w(m.in_pad());
  std::vector<int32_t> dots(G);
  for (uint32_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = m.codes() + r * m.row_bytes();
    for (uint32_t k = 0; k < m.in_pad(); ++k)
      w[k] = m.codebook().value[CodeAt(row, k, m.code_bits())];
    for (uint32_t t = 0; t < a.tokens(); ++t) {
      const int8_t* q = a.natural(t);
      for (uint32_t g = 0; g < G; ++g) {
        int32_t d = 0;
        for (uint32_t k = g * n; k < (g + 1) * n; ++k) d += int32_t(w[k]) * q[k];
        dots[g] = d;
      }
      y[t * y_stride + r] = Accumulate(m, r, dots.data(), gs.data() + size_t(t) * G);
    }
  }
}

}  // namespace

const KernelTable& ScalarTable() {
  static const KernelTable table = {Prepare, MatVecScalar, MatMatScalar, GroupDotsScalar};
  return table;
}

}  // namespace cact::kernels::internal
