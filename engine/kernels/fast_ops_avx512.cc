// AVX-512 versions of the fast-path numeric kernels: the same operations as the scalar
// definitions in fast_ops.cc, lane by lane, so the results are bit-identical.
#if !defined(__clang__)  // clang has no such warning, and warns about the pragma
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/kernels/fast_ops_table.h"

namespace cact::kernels::internal {
namespace {

inline __m512 Exp16(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  __m512 y = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), y);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpC[6]);
  for (int k = 5; k >= 0; --k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC[k]));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mask_mov_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(bits)), nan, x);
}

template <typename F>
inline void Map(float* x, size_t n, F f) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, k, f(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

void ExpV(float* x, size_t n) { Map(x, n, Exp16); }
inline __m512 Negate(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int(0x80000000u))));
}
void SigmoidV(float* x, size_t n) {
  const __m512 one = _mm512_set1_ps(1.f);
  Map(x, n, [&](__m512 v) { return _mm512_div_ps(one, _mm512_add_ps(one, Exp16(Negate(v)))); });
}
void SiluV(float* x, size_t n) {
  const __m512 one = _mm512_set1_ps(1.f);
  Map(x, n, [&](__m512 v) { return _mm512_div_ps(v, _mm512_add_ps(one, Exp16(Negate(v)))); });
}

void FwhtV(float* x, uint32_t n) {
  const __m512 s1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 s2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
  const __m512 s4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
  const __m512 s8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (uint32_t i = 0; i < n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    v = _mm512_fmadd_ps(v, s1, _mm512_permute_ps(v, 0xB1));
    v = _mm512_fmadd_ps(v, s2, _mm512_permute_ps(v, 0x4E));
    v = _mm512_fmadd_ps(v, s4, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_fmadd_ps(v, s8, _mm512_shuffle_f32x4(v, v, 0x4E));
    _mm512_storeu_ps(x + i, v);
  }
  for (uint32_t h = 16; h < n; h <<= 1)
    for (uint32_t i = 0; i < n; i += 2 * h)
      for (uint32_t j = i; j < i + h; j += 16) {
        __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
        _mm512_storeu_ps(x + j, _mm512_add_ps(a, b));
        _mm512_storeu_ps(x + j + h, _mm512_sub_ps(a, b));
      }
  const __m512 s = _mm512_set1_ps(1.0f / float(std::sqrt(double(n))));
  for (uint32_t i = 0; i < n; i += 16)
    _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
}

inline __m512 LoadI8(const int8_t* p, __mmask16 k) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p)));
}

// Softmax of one head's `total` (> 0) scores in place: max (exact in any order), exp, 16
// strided partial sums and a fixed tree; returns 1 / sum.
inline float SoftmaxInPlace(float* s, uint32_t total) {
  __m512 mv = _mm512_set1_ps(s[0]);
  for (uint32_t t = 0; t < total; t += 16) {
    const __mmask16 m = __mmask16(total - t < 16 ? (1u << (total - t)) - 1 : 0xFFFF);
    mv = _mm512_mask_max_ps(mv, m, _mm512_maskz_loadu_ps(m, s + t), mv);
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
  __m512 part = _mm512_setzero_ps();
  for (uint32_t t = 0; t < total; t += 16) {
    const __mmask16 m = __mmask16(total - t < 16 ? (1u << (total - t)) - 1 : 0xFFFF);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), mx));
    _mm512_mask_storeu_ps(s + t, m, e);
    part = _mm512_mask_add_ps(part, m, part, e);
  }
  part = _mm512_add_ps(part, _mm512_shuffle_f32x4(part, part, 0x4E));
  part = _mm512_add_ps(part, _mm512_shuffle_f32x4(part, part, 0xB1));
  part = _mm512_add_ps(part, _mm512_permute_ps(part, 0x4E));
  part = _mm512_add_ps(part, _mm512_permute_ps(part, 0xB1));
  return 1.f / _mm512_cvtss_f32(part);
}

void AttendV(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
             const float* key_scale, const int8_t* values, const float* value_scale, uint32_t hd,
             const float* q, uint32_t n_q, float* out, float* scratch) {
  const uint32_t total = runs.total();
  const float inv_sqrt = 1.0f / std::sqrt(float(hd));
  const uint32_t nvec = (hd + 15) / 16;
  const __mmask16 last = __mmask16(hd % 16 ? (1u << (hd % 16)) - 1 : 0xFFFF);
  for (uint32_t i0 = 0; i0 < n_q; i0 += 2) {
    const uint32_t nh = n_q - i0 >= 2 ? 2 : 1;
    // Scores, lanes = rows: two 16-row blocks at a time when the run has them, so four
    // independent fma chains hide the fma latency (each row's sum keeps its order over c).
    const float* q0 = q + size_t(i0) * hd;
    const float* q1 = q0 + hd;
    const __m512 inv_v = _mm512_set1_ps(inv_sqrt);
    auto store = [&](__m512 a, __m512 b, __mmask16 m, size_t r0, uint32_t at) {
      const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, key_scale + r0), inv_v);
      _mm512_mask_storeu_ps(scratch + size_t(i0) * total + at, m, _mm512_mul_ps(a, t));
      if (nh == 2)
        _mm512_mask_storeu_ps(scratch + size_t(i0 + 1) * total + at, m, _mm512_mul_ps(b, t));
    };
    uint32_t idx = 0;
    for (int k = 0; k < runs.n; ++k) {
      uint32_t j = 0;
      for (; j + 32 <= runs.count[k]; j += 32) {
        const size_t r0 = runs.start[k] + j;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (uint32_t c = 0; c < hd; ++c) {
          const int8_t* kc = keys_t + c * row_stride + r0;
          const __m512 kv0 = LoadI8(kc, 0xFFFF), kv1 = LoadI8(kc + 16, 0xFFFF);
          const __m512 qa = _mm512_set1_ps(q0[c]);
          a0 = _mm512_fmadd_ps(qa, kv0, a0);
          b0 = _mm512_fmadd_ps(qa, kv1, b0);
          if (nh == 2) {
            const __m512 qb = _mm512_set1_ps(q1[c]);
            a1 = _mm512_fmadd_ps(qb, kv0, a1);
            b1 = _mm512_fmadd_ps(qb, kv1, b1);
          }
        }
        store(a0, a1, 0xFFFF, r0, idx);
        store(b0, b1, 0xFFFF, r0 + 16, idx + 16);
        idx += 32;
      }
      for (; j < runs.count[k]; j += 16) {
        const uint32_t cnt = runs.count[k] - j < 16 ? runs.count[k] - j : 16;
        const __mmask16 m = __mmask16((1u << cnt) - 1);
        const size_t r0 = runs.start[k] + j;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (uint32_t c = 0; c < hd; ++c) {
          const __m512 kv = LoadI8(keys_t + c * row_stride + r0, m);
          a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[c]), kv, a0);
          if (nh == 2) a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[c]), kv, a1);
        }
        store(a0, a1, m, r0, idx);
        idx += cnt;
      }
    }
    float inv[2] = {0.f, 0.f};
    for (uint32_t i = i0; i < i0 + nh; ++i) {
      float* oi = out + size_t(i) * hd;
      for (uint32_t c = 0; c < hd; ++c) oi[c] = 0.f;
      if (total == 0) continue;
      inv[i - i0] = SoftmaxInPlace(scratch + size_t(i) * total, total);
    }
    if (total == 0) continue;
    // Weighted values: lanes = dimensions, an fma chain over rows in order per head; each
    // value row is converted once for both heads.
    const float* s0 = scratch + size_t(i0) * total;
    const float* s1 = s0 + total;
    __m512 acc0[16], acc1[16];
    for (uint32_t v = 0; v < nvec; ++v) acc0[v] = acc1[v] = _mm512_setzero_ps();
    uint32_t id = 0;
    for (int k = 0; k < runs.n; ++k)
      for (uint32_t j = 0; j < runs.count[k]; ++j, ++id) {
        const size_t r = runs.start[k] + j;
        const int8_t* vr = values + r * hd;
        const __m512 w0 = _mm512_set1_ps((s0[id] * inv[0]) * value_scale[r]);
        if (nh == 2) {
          const __m512 w1 = _mm512_set1_ps((s1[id] * inv[1]) * value_scale[r]);
          for (uint32_t v = 0; v < nvec; ++v) {
            const __m512 x = LoadI8(vr + 16 * v, v + 1 == nvec ? last : 0xFFFF);
            acc0[v] = _mm512_fmadd_ps(w0, x, acc0[v]);
            acc1[v] = _mm512_fmadd_ps(w1, x, acc1[v]);
          }
        } else {
          for (uint32_t v = 0; v < nvec; ++v)
            acc0[v] =
                _mm512_fmadd_ps(w0, LoadI8(vr + 16 * v, v + 1 == nvec ? last : 0xFFFF), acc0[v]);
        }
      }
    for (uint32_t v = 0; v < nvec; ++v) {
      const __mmask16 m = v + 1 == nvec ? last : 0xFFFF;
      _mm512_mask_storeu_ps(out + size_t(i0) * hd + 16 * v, m, acc0[v]);
      if (nh == 2) _mm512_mask_storeu_ps(out + size_t(i0 + 1) * hd + 16 * v, m, acc1[v]);
    }
  }
}

// ---- a block of query tokens (AttendInt8Block): up to 8 queries (token x head) at a time
// share each converted key and value row. Per query the operations are AttendV's: the same
// fma chain per score, the same softmax over its own visible scores, and the same fma chain
// over its visible value rows in order (rows it does not see leave its sums untouched).

// Scores of Q queries over every row of `runs` into s[j][union index].
template <int Q>
void BlockScores(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                 const float* key_scale, uint32_t hd, const float* const* q, float* const* s) {
  const __m512 inv_v = _mm512_set1_ps(1.0f / std::sqrt(float(hd)));
  uint32_t idx = 0;
  for (int k = 0; k < runs.n; ++k) {
    uint32_t j = 0;
    for (; j + 32 <= runs.count[k]; j += 32, idx += 32) {
      const size_t r0 = runs.start[k] + j;
      __m512 a[Q], b[Q];
      for (int i = 0; i < Q; ++i) a[i] = b[i] = _mm512_setzero_ps();
      for (uint32_t c = 0; c < hd; ++c) {
        const int8_t* kc = keys_t + c * row_stride + r0;
        const __m512 kv0 = LoadI8(kc, 0xFFFF), kv1 = LoadI8(kc + 16, 0xFFFF);
        for (int i = 0; i < Q; ++i) {
          const __m512 qi = _mm512_set1_ps(q[i][c]);
          a[i] = _mm512_fmadd_ps(qi, kv0, a[i]);
          b[i] = _mm512_fmadd_ps(qi, kv1, b[i]);
        }
      }
      const __m512 t0 = _mm512_mul_ps(_mm512_loadu_ps(key_scale + r0), inv_v);
      const __m512 t1 = _mm512_mul_ps(_mm512_loadu_ps(key_scale + r0 + 16), inv_v);
      for (int i = 0; i < Q; ++i) {
        _mm512_storeu_ps(s[i] + idx, _mm512_mul_ps(a[i], t0));
        _mm512_storeu_ps(s[i] + idx + 16, _mm512_mul_ps(b[i], t1));
      }
    }
    for (; j < runs.count[k]; j += 16) {
      const uint32_t cnt = runs.count[k] - j < 16 ? runs.count[k] - j : 16;
      const __mmask16 m = __mmask16((1u << cnt) - 1);
      const size_t r0 = runs.start[k] + j;
      __m512 a[Q];
      for (int i = 0; i < Q; ++i) a[i] = _mm512_setzero_ps();
      for (uint32_t c = 0; c < hd; ++c) {
        const __m512 kv = LoadI8(keys_t + c * row_stride + r0, m);
        for (int i = 0; i < Q; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][c]), kv, a[i]);
      }
      const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, key_scale + r0), inv_v);
      for (int i = 0; i < Q; ++i) _mm512_mask_storeu_ps(s[i] + idx, m, _mm512_mul_ps(a[i], t));
      idx += cnt;
    }
  }
}

// out[j] = sum over the rows j sees (bit j of vis[union index]) of w[j][row] * value, an fma
// chain over rows in order per query; 32 dimensions at a time.
template <int Q>
void BlockValues(const AttentionRuns& runs, const int8_t* values, uint32_t hd,
                 const float* const* w, const uint8_t* vis, float* const* out) {
  const uint32_t nvec = (hd + 15) / 16;
  const __mmask16 last = __mmask16(hd % 16 ? (1u << (hd % 16)) - 1 : 0xFFFF);
  constexpr uint8_t kAll = uint8_t((1u << Q) - 1);
  for (uint32_t v0 = 0; v0 < nvec; v0 += 2) {
    const bool two = v0 + 1 < nvec;
    const __mmask16 m0 = v0 + 1 == nvec ? last : 0xFFFF;
    const __mmask16 m1 = v0 + 2 == nvec ? last : 0xFFFF;
    __m512 a[Q], b[Q];
    for (int i = 0; i < Q; ++i) a[i] = b[i] = _mm512_setzero_ps();
    uint32_t u = 0;
    for (int k = 0; k < runs.n; ++k)
      for (uint32_t j = 0; j < runs.count[k]; ++j, ++u) {
        const int8_t* vr = values + (runs.start[k] + j) * hd + 16 * v0;
        const __m512 x0 = LoadI8(vr, m0);
        const __m512 x1 = two ? LoadI8(vr + 16, m1) : _mm512_setzero_ps();
        const uint8_t seen = vis[u] & kAll;
        if (seen == kAll) {
          for (int i = 0; i < Q; ++i) {
            const __m512 wi = _mm512_set1_ps(w[i][u]);
            a[i] = _mm512_fmadd_ps(wi, x0, a[i]);
            if (two) b[i] = _mm512_fmadd_ps(wi, x1, b[i]);
          }
        } else if (seen) {
          for (int i = 0; i < Q; ++i) {
            const __mmask16 on = (seen >> i) & 1 ? 0xFFFF : 0;
            const __m512 wi = _mm512_set1_ps(w[i][u]);
            a[i] = _mm512_mask3_fmadd_ps(wi, x0, a[i], on);
            if (two) b[i] = _mm512_mask3_fmadd_ps(wi, x1, b[i], on);
          }
        }
      }
    for (int i = 0; i < Q; ++i) {
      _mm512_mask_storeu_ps(out[i] + 16 * v0, m0, a[i]);
      if (two) _mm512_mask_storeu_ps(out[i] + 16 * v0 + 16, m1, b[i]);
    }
  }
}

// Weights w[u] = (p * inv) * vs[u] for n rows (p: the softmax numerators), as AttendV.
inline void Weights(const float* p, float inv, const float* vs, uint32_t n, float* w) {
  const __m512 iv = _mm512_set1_ps(inv);
  for (uint32_t k = 0; k < n; k += 16) {
    const __mmask16 m = __mmask16(n - k < 16 ? (1u << (n - k)) - 1 : 0xFFFF);
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + k), iv);
    _mm512_mask_storeu_ps(w + k, m, _mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, vs + k)));
  }
}

#include "engine/kernels/fast_ops_block_impl.h"

void QuantizeV(const float* x, uint32_t n, int8_t* q, float* scale) {
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 m = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (uint32_t i = 0; i < n; i += 16) {
    const __mmask16 k = __mmask16(n - i < 16 ? (1u << (n - i)) - 1 : 0xFFFF);
    const __m512 a = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(k, x + i)), absmask));
    bad |= _mm512_cmp_ps_mask(a, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ);
    m = _mm512_max_ps(a, m);  // a NaN never wins
  }
  const float amax = _mm512_reduce_max_ps(m);
  if (bad || amax == 0.f) {
    for (uint32_t i = 0; i < n; ++i) q[i] = 0;
    *scale = bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
    return;
  }
  const __m512 inv = _mm512_set1_ps(127.f / amax);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (uint32_t i = 0; i < n; i += 16) {
    const __mmask16 k = __mmask16(n - i < 16 ? (1u << (n - i)) - 1 : 0xFFFF);
    __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
    r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
    _mm_mask_storeu_epi8(q + i, k, _mm512_cvtepi32_epi8(r));
  }
  *scale = amax / 127.f;
}

void MixV(const float* P, const float* X, const float* h, const float* x, const float* u,
          uint32_t m, uint32_t d, float* out) {
  for (uint32_t c = 0; c < d; c += 16) {
    const __mmask16 k = __mmask16(d - c < 16 ? (1u << (d - c)) - 1 : 0xFFFF);
    const __m512 delta =
        _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), _mm512_maskz_loadu_ps(k, u + c));
    __m512 xj[16];
    for (uint32_t j = 0; j < m && j < 16; ++j)
      xj[j] = _mm512_maskz_loadu_ps(k, X + size_t(j) * d + c);
    for (uint32_t i = 0; i < m; ++i) {
      __m512 acc = _mm512_setzero_ps();
      for (uint32_t j = 0; j < m; ++j)
        acc =
            _mm512_fmadd_ps(_mm512_set1_ps(P[i * m + j]),
                            j < 16 ? xj[j] : _mm512_maskz_loadu_ps(k, X + size_t(j) * d + c), acc);
      _mm512_mask_storeu_ps(out + size_t(i) * d + c, k,
                            _mm512_fmadd_ps(_mm512_set1_ps(h[i]), delta, acc));
    }
  }
}

}  // namespace

const FastOpsTable& Avx512FastOps() {
  static const FastOpsTable t = {ExpV,    SigmoidV,     SiluV,     FwhtV,
                                 AttendV, AttendBlockV, QuantizeV, MixV};
  return t;
}

}  // namespace cact::kernels::internal
