// Scalar definitions of the fast-path numeric kernels (fast_ops.h) and their dispatch.
#include "engine/kernels/fast_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops_table.h"
#include "engine/kernels/kernel_table.h"

namespace cact::kernels {
namespace internal {
namespace {

inline float ExpOne(float x) {
  if (x != x) return x;
  x = x < kExpLo ? kExpLo : x;
  x = x > kExpHi ? kExpHi : x;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpC[6];
  for (int k = 5; k >= 0; --k) p = std::fma(p, r, kExpC[k]);
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  return p * s;
}

void ExpScalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = ExpOne(x[i]);
}
void SigmoidScalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = 1.f / (1.f + ExpOne(-x[i]));
}
void SiluScalar(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.f + ExpOne(-x[i]));
}

void FwhtScalar(float* x, uint32_t n) {
  FwhtButterfliesScalar(x, n);
  const float s = 1.0f / float(std::sqrt(double(n)));
  for (uint32_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace

float QueryScoreScale(float amax, uint32_t hd, ActPrecision query) {
  if (!(amax <= std::numeric_limits<float>::max())) return std::numeric_limits<float>::quiet_NaN();
  const float qk = (amax / 127.f) * (1.0f / std::sqrt(float(hd)));
  return query == ActPrecision::kInt8x2 ? qk * (1.f / 128) : qk;
}

namespace {

// The int8 levels of x (fast_ops.h, QuantizeInt8): q1 = clamp(nearbyint(x * (127 / amax)),
// +-127), and when q2 is given the residual level in 1/128 steps. Returns amax = max |x[i]|,
// or NaN if some x[i] is a NaN or an infinity; both then, and for an all-zero x, give zero
// levels.
float LevelsScalar(const float* x, uint32_t n, int8_t* q1, int8_t* q2) {
  float amax = 0.f;
  bool finite = true;
  for (uint32_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (!(a <= std::numeric_limits<float>::max())) finite = false;
    amax = a > amax ? a : amax;
  }
  if (!finite || amax == 0.f) {
    for (uint32_t i = 0; i < n; ++i) {
      q1[i] = 0;
      if (q2) q2[i] = 0;
    }
    return finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
  }
  const float inv = 127.f / amax;
  for (uint32_t i = 0; i < n; ++i) {
    const float p = x[i] * inv;
    const float a = std::min(127.f, std::max(-127.f, std::nearbyint(p)));
    q1[i] = int8_t(a);
    if (q2) q2[i] = int8_t(std::min(127.f, std::max(-127.f, std::nearbyint((p - a) * 128.f))));
  }
  return amax;
}

void AttendScalar(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                  const float* key_scale, const int8_t* values, const float* value_scale,
                  uint32_t hd, const float* q, uint32_t n_q, ActPrecision query, float* out,
                  float* scratch) {
  const uint32_t total = runs.total();
  const bool two = query == ActPrecision::kInt8x2;
  std::vector<int8_t> q1(hd), q2(hd);
  for (uint32_t i = 0; i < n_q; ++i) {
    float* s = scratch + size_t(i) * total;
    float* oi = out + size_t(i) * hd;
    for (uint32_t c = 0; c < hd; ++c) oi[c] = 0.f;
    if (total == 0) continue;
    const float qk = QueryScoreScale(
        LevelsScalar(q + size_t(i) * hd, hd, q1.data(), two ? q2.data() : nullptr), hd, query);
    uint32_t idx = 0;
    for (int k = 0; k < runs.n; ++k)
      for (uint32_t j = 0; j < runs.count[k]; ++j) {
        const size_t r = runs.start[k] + j;
        int32_t d1 = 0, d2 = 0;
        for (uint32_t c = 0; c < hd; ++c) {
          const int32_t key = keys_t[KeyOffset(c, r, row_stride)];
          d1 += int32_t(q1[c]) * key;
          if (two) d2 += int32_t(q2[c]) * key;
        }
        // (int64: head dimensions past the SIMD kernels' 256 could overflow 128 * d1)
        s[idx++] = float(two ? int64_t(d1) * 128 + d2 : int64_t(d1)) * (key_scale[r] * qk);
      }
    float m = s[0];
    for (uint32_t t = 1; t < total; ++t) m = s[t] > m ? s[t] : m;
    float part[16] = {};
    for (uint32_t t = 0; t < total; ++t) {
      s[t] = ExpOne(s[t] - m);
      part[t % 16] += s[t];
    }
    for (uint32_t h = 8; h >= 1; h /= 2)
      for (uint32_t j = 0; j < h; ++j) part[j] += part[j + h];
    const float inv = 1.f / part[0];
    idx = 0;
    for (int k = 0; k < runs.n; ++k)
      for (uint32_t j = 0; j < runs.count[k]; ++j) {
        const size_t r = runs.start[k] + j;
        const float w = (s[idx++] * inv) * value_scale[r];
        const int8_t* v = values + r * hd;
        for (uint32_t c = 0; c < hd; ++c) oi[c] = std::fma(w, float(v[c]), oi[c]);
      }
  }
}

void AttendBlockScalar(const AttentionBlock& block, const int8_t* keys_t, size_t row_stride,
                       const float* key_scale, const int8_t* values, const float* value_scale,
                       uint32_t hd, const float* q, size_t q_stride, uint32_t n_q,
                       ActPrecision query, float* out, size_t out_stride, float* scratch) {
  for (uint32_t t = 0; t < block.tokens; ++t)
    AttendScalar(block.TokenRuns(t), keys_t, row_stride, key_scale, values, value_scale, hd,
                 q + t * q_stride, n_q, query, out + t * out_stride, scratch);
}

void QuantizeScalar(const float* x, uint32_t n, int8_t* q, float* scale) {
  *scale = LevelsScalar(x, n, q, nullptr) / 127.f;  // (NaN stays NaN, 0 stays 0)
}

void MixScalar(const float* P, const float* X, const float* h, const float* x, const float* u,
               uint32_t m, uint32_t d, float* out) {
  for (uint32_t i = 0; i < m; ++i)
    for (uint32_t c = 0; c < d; ++c) {
      float acc = 0.f;
      for (uint32_t j = 0; j < m; ++j) acc = std::fma(P[i * m + j], X[size_t(j) * d + c], acc);
      out[size_t(i) * d + c] = std::fma(h[i], x[c] - u[c], acc);
    }
}

}  // namespace

const FastOpsTable& ScalarFastOps() {
  static const FastOpsTable t = {ExpScalar,    SigmoidScalar,     SiluScalar,     FwhtScalar,
                                 AttendScalar, AttendBlockScalar, QuantizeScalar, MixScalar};
  return t;
}

}  // namespace internal

AttentionRuns AttentionBlock::TokenRuns(uint32_t t) const {
  AttentionRuns out;
  // Union indices [a, b) as slot runs; a piece continuing the previous run's slots extends
  // it (the block's union has at most three runs, and so has each token's part of it).
  auto add = [&](uint32_t a, uint32_t b) {
    uint32_t base = 0;
    for (int k = 0; k < runs.n; ++k) {
      const uint32_t lo = std::max(a, base), hi = std::min(b, base + runs.count[k]);
      if (lo < hi) {
        const size_t s = runs.start[k] + (lo - base);
        if (out.n > 0 && out.start[out.n - 1] + out.count[out.n - 1] == s)
          out.count[out.n - 1] += hi - lo;
        else
          out.Add(s, hi - lo);
      }
      base += runs.count[k];
    }
  };
  add(0, head[t]);
  add(from[t], to[t]);
  return out;
}

namespace {
const internal::FastOpsTable& Ops() {
  const Isa isa = ActiveIsa();
  if (IsAvx512(isa)) return internal::Avx512FastOps();
  return isa == Isa::kScalar ? internal::ScalarFastOps() : internal::Avx2FastOps();
}
}  // namespace

float Exp(float x) { return internal::ExpOne(x); }
void ExpInPlace(float* x, size_t n) { Ops().exp(x, n); }
void SigmoidInPlace(float* x, size_t n) { Ops().sigmoid(x, n); }
void SiluInPlace(float* x, size_t n) { Ops().silu(x, n); }
void FwhtOrthonormal(float* x, uint32_t n) {
  (n >= 16 ? Ops() : internal::ScalarFastOps()).fwht(x, n);  // the SIMD versions take n >= 16
}
void AttendInt8Block(const AttentionBlock& block, const int8_t* keys_t, size_t row_stride,
                     const float* key_scale, const int8_t* values, const float* value_scale,
                     uint32_t head_dim, const float* q, size_t q_stride, uint32_t n_q,
                     ActPrecision query, float* out, size_t out_stride, float* scratch) {
  const auto& ops = head_dim <= internal::kSimdMaxHeadDim ? Ops() : internal::ScalarFastOps();
  ops.attend_block(block, keys_t, row_stride, key_scale, values, value_scale, head_dim, q, q_stride,
                   n_q, query, out, out_stride, scratch);
}
void QuantizeInt8(const float* x, uint32_t n, int8_t* q, float* scale) {
  Ops().quantize(x, n, q, scale);
}
void MixLanes(const float* P, const float* X, const float* h, const float* x, const float* u,
              uint32_t m, uint32_t d, float* out) {
  Ops().mix(P, X, h, x, u, m, d, out);
}
void AttendInt8(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                const float* key_scale, const int8_t* values, const float* value_scale,
                uint32_t head_dim, const float* q, uint32_t n_q, ActPrecision query, float* out,
                float* scratch) {
  if (runs.total() == 0) {  // no visible row: every output 0 (the ISA kernels need a row)
    std::memset(out, 0, size_t(n_q) * head_dim * sizeof(float));
    return;
  }
  const auto& ops = head_dim <= internal::kSimdMaxHeadDim ? Ops() : internal::ScalarFastOps();
  ops.attend(runs, keys_t, row_stride, key_scale, values, value_scale, head_dim, q, n_q, query, out,
             scratch);
}

}  // namespace cact::kernels
