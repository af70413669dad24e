#include "engine/ops.h"

#include <algorithm>
#include <cmath>

namespace cact::ops {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float Silu(float x) { return x * Sigmoid(x); }

float Dot(const float* a, const float* b, size_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  for (; i < n; ++i) s[i % 8] += a[i] * b[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void RmsUnit(const float* x, size_t n, float eps, float* y) {
  const float inv = 1.0f / std::sqrt(Dot(x, x, n) / float(n) + eps);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv;
}

void Zcn(const float* x, const float* g, size_t n, float eps, float* y) {
  const float rms = std::sqrt(Dot(x, x, n) / float(n) + eps);
  for (size_t i = 0; i < n; ++i) y[i] = (1.0f + g[i]) * x[i] / rms;
}

void MatVec(const float* w, size_t rows, size_t cols, const float* x, float* y, int threads) {
  const bool parallel = threads > 1 && rows * cols >= (size_t{1} << 16);
#pragma omp parallel for num_threads(threads) if (parallel) schedule(static)
  for (size_t r = 0; r < rows; ++r) y[r] = Dot(w + r * cols, x, cols);
}

std::vector<float> RopeInvFreq(uint32_t head_dim, float theta) {
  std::vector<float> inv(head_dim / 2);
  for (uint32_t i = 0; i < head_dim / 2; ++i)
    inv[i] = 1.0f / std::pow(theta, float(2 * i) / float(head_dim));
  return inv;
}

void RopeHalfSplit(float* x, uint32_t head_dim, uint32_t pos, std::span<const float> inv_freq) {
  const uint32_t half = head_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const float angle = float(pos) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * c - x2 * s;
    x[i + half] = x2 * c + x1 * s;
  }
}

namespace {
// logsumexp of n values spaced `stride` apart.
float LogSumExp(const float* v, uint32_t n, uint32_t stride) {
  float mx = -INFINITY;
  for (uint32_t i = 0; i < n; ++i) mx = std::max(mx, v[i * stride]);
  if (!std::isfinite(mx)) return mx;
  float s = 0;
  for (uint32_t i = 0; i < n; ++i) s += std::exp(v[i * stride] - mx);
  return mx + std::log(s);
}
}  // namespace

void SinkhornLog(float* a, uint32_t m, int iters) {
  for (int it = 0; it < iters; ++it) {
    for (uint32_t i = 0; i < m; ++i) {  // rows
      const float lse = LogSumExp(a + i * m, m, 1);
      for (uint32_t j = 0; j < m; ++j) a[i * m + j] -= lse;
    }
    for (uint32_t j = 0; j < m; ++j) {  // columns
      const float lse = LogSumExp(a + j, m, m);
      for (uint32_t i = 0; i < m; ++i) a[i * m + j] -= lse;
    }
  }
  for (uint32_t i = 0; i < m * m; ++i) a[i] = std::exp(a[i]);
}

uint32_t EngramSlot(const BlockSpec& block, uint32_t table, uint32_t order,
                    std::span<const int32_t> history, size_t t, uint32_t slots) {
  uint32_t acc = EngramHashStart(block, table);
  for (uint32_t j = 0; j < order; ++j) {
    const uint32_t tok = j <= t ? uint32_t(history[t - j]) : 0u;
    acc = (acc ^ tok) * block.hash_prime;
  }
  acc ^= acc >> block.hash_shift;
  return acc % slots;
}

}  // namespace cact::ops
