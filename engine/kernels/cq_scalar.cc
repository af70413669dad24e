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

inline float RoundClamp127(float v) { return std::min(127.f, std::max(-127.f, std::nearbyint(v))); }

void Prepare(const float* x, ActivationBatch* a, uint32_t t) {
  const uint32_t n = a->group(), in = a->in();
  const bool two = a->two_level();
  int8_t* q1 = a->mutable_natural(t, 0);
  int8_t* q2 = a->mutable_natural(t, 1);
  float* scale = a->mutable_scale(t);
  const float factor = ActScaleFactor(n);
  float u[512];
  for (uint32_t g = 0; g < a->groups(); ++g) {
    uint32_t base = g * n;
    for (uint32_t i = 0; i < n; ++i) u[i] = base + i < in ? x[base + i] : 0.f;
    FwhtButterfliesScalar(u, n);
    float amax = 0.f;
    bool finite = true;
    for (uint32_t i = 0; i < n; ++i) {
      float m = std::fabs(u[i]);
      if (!(m <= std::numeric_limits<float>::max())) finite = false;
      amax = m > amax ? m : amax;
    }
    int32_t s1 = 0, s2 = 0;
    if (!finite || amax == 0.f) {
      for (uint32_t i = 0; i < n; ++i) q1[base + i] = 0;
      if (two)
        for (uint32_t i = 0; i < n; ++i) q2[base + i] = 0;
      scale[g] = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
    } else {
      const float inv = 127.f / amax;
      for (uint32_t i = 0; i < n; ++i) {
        const float p = u[i] * inv;
        const float r = RoundClamp127(p);
        q1[base + i] = int8_t(r);
        s1 += int32_t(r);
        if (two) {
          const float r2 = RoundClamp127((p - r) * 128.f);
          q2[base + i] = int8_t(r2);
          s2 += int32_t(r2);
        }
      }
      scale[g] = amax * factor;
    }
    a->mutable_sum(t, 0)[g] = s1;
    if (two) a->mutable_sum(t, 1)[g] = s2;
  }
  for (int level = 0; level < (two ? 2 : 1); ++level) {
    int8_t* q = a->mutable_natural(t, level);
    for (uint32_t k = a->in_pad(); k % 64; ++k) q[k] = 0;
    BuildPermutedLayoutsScalar(a, t, level);
  }
}

// The combined exact group dot D (cq_kernels.h GroupDots) from codebook values w (hi) and
// wl (lo) per code position.
int32_t CombinedDot(const ActivationBatch& a, uint32_t t, uint32_t M, const int8_t* w,
                    const int8_t* wl, uint32_t k0, uint32_t k1) {
  const int8_t* q1 = a.natural(t, 0);
  const int8_t* q2 = a.natural(t, 1);
  int64_t d1 = 0, d2 = 0;
  for (uint32_t k = k0; k < k1; ++k) {
    d1 += int32_t(w[k]) * q1[k];
    if (a.two_level()) d2 += int32_t(w[k]) * q2[k];
    if (wl) d2 += int32_t(wl[k]) * q1[k];
  }
  return int32_t(int64_t(M) * d1 + d2);
}

// Codebook values (and residuals) of one row.
void RowValues(const CqKernelMatrix& m, uint32_t r, int8_t* w, int8_t* wl) {
  const uint8_t* row = m.row_codes(r);
  const Int8Codebook& cb = m.codebook();
  const auto code_at = m.width().code_at;  // ternary: the crumb 0..3
  for (uint32_t k = 0; k < m.in_pad(); ++k) {
    uint32_t c = code_at(row, k);
    w[k] = cb.value[c];
    if (wl) wl[k] = cb.lo[c];
  }
}

float Accumulate(const CqKernelMatrix& m, uint32_t r, const int32_t* dots, const float* gs) {
  float acc = 0.f;
  for (uint32_t g = 0; g < m.groups(); ++g) {
    float s = HalfBitsToFloat(LoadHalfBits(m.row_norms(r) + size_t(g) * 2)) * gs[g];
    acc = std::fma(s, float(dots[g]), acc);
  }
  return acc;
}

void GroupDotsScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                     uint32_t row_begin, uint32_t row_end, int32_t* dots) {
  const uint32_t M = DotMultiplier(a, m), n = m.group();
  std::vector<int8_t> w(m.in_pad()), wl(m.codebook().has_lo ? m.in_pad() : 0);
  for (uint32_t r = row_begin; r < row_end; ++r) {
    RowValues(m, r, w.data(), wl.empty() ? nullptr : wl.data());
    for (uint32_t g = 0; g < m.groups(); ++g)
      dots[size_t(r - row_begin) * m.groups() + g] =
          CombinedDot(a, t, M, w.data(), wl.empty() ? nullptr : wl.data(), g * n, (g + 1) * n);
  }
}

void MatVecScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
                  uint32_t row_end, float* y) {
  std::vector<float> gs(m.groups());
  GroupScales(a, t, m, gs.data());
  std::vector<int32_t> dots(m.groups());
  for (uint32_t r = row_begin; r < row_end; ++r) {
    GroupDotsScalar(m, a, t, r, r + 1, dots.data());
    y[r] = Accumulate(m, r, dots.data(), gs.data());
  }
}

// Unpacks each row once into int8 codebook values and reuses it for every token.
void MatMatScalar(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                  uint32_t row_end, float* y, size_t y_stride) {
  const uint32_t G = m.groups(), n = m.group(), M = DotMultiplier(a, m);
  std::vector<float> gs(size_t(a.tokens()) * G);
  for (uint32_t t = 0; t < a.tokens(); ++t) GroupScales(a, t, m, gs.data() + size_t(t) * G);
  std::vector<int8_t> w(m.in_pad()), wl(m.codebook().has_lo ? m.in_pad() : 0);
  std::vector<int32_t> dots(G);
  for (uint32_t r = row_begin; r < row_end; ++r) {
    RowValues(m, r, w.data(), wl.empty() ? nullptr : wl.data());
    for (uint32_t t = 0; t < a.tokens(); ++t) {
      for (uint32_t g = 0; g < G; ++g)
        dots[g] =
            CombinedDot(a, t, M, w.data(), wl.empty() ? nullptr : wl.data(), g * n, (g + 1) * n);
      y[t * y_stride + r] = Accumulate(m, r, dots.data(), gs.data() + size_t(t) * G);
    }
  }
}

}  // namespace

void FwhtButterfliesScalar(float* v, uint32_t n) {
  for (uint32_t h = 1; h < n; h <<= 1)
    for (uint32_t i = 0; i < n; i += 2 * h)
      for (uint32_t j = i; j < i + h; ++j) {
        float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

const KernelTable& ScalarTable() {
  // One set of functions for every width: they read codes through the width's code_at.
  static constexpr WidthKernels kAnyWidth = {MatVecScalar, MatMatScalar, GroupDotsScalar};
  static const KernelTable table = {Prepare, {kAnyWidth, kAnyWidth, kAnyWidth}};
  return table;
}

}  // namespace cact::kernels::internal
