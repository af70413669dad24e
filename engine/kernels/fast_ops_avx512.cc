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

// ---- a block of query tokens (AttendInt8Block): up to 8 queries (token x head) at a time
// share each converted key and value row. Per query the operations are AttendV's: the same
// integer score, the same softmax over its own visible scores, and the same fma chain over
// its visible value rows in order (rows it does not see leave its sums untouched).

// acc + the dword dots of unsigned bytes a and signed bytes b (vpdpbusd). In asm because
// GCC 12, given 20 accumulators of the intrinsic, copies each one around every use and
// spills some to the stack (the scores ran at half speed).
inline __m512i Dpbusd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// Key columns c..c+3 (c a multiple of 4) of 64 rows from r0 as VNNI operands: k[u] holds
// rows 16u..16u+15, each dword one row's four bytes (the quad layout, KeyOffset); rows
// past the run (bits of m clear) read as 0.
inline void KeyQuads(const int8_t* keys_t, size_t row_stride, uint32_t c, size_t r0, __mmask64 m,
                     __m512i k[4]) {
  const int8_t* p = keys_t + KeyOffset(c, r0, row_stride);
#pragma GCC unroll 4
  for (int u = 0; u < 4; ++u) k[u] = _mm512_maskz_loadu_epi32(__mmask16(m >> (16 * u)), p + 64 * u);
}

// The int8 levels of x (fast_ops.h): q1 = clamp(nearbyint(x * (127 / amax)), +-127), and
// when q2 is given the residual level in 1/128 steps. Returns amax = max |x[i]|, or NaN if
// some x[i] is a NaN or an infinity; both then, and for an all-zero x, give zero levels.
float Levels(const float* x, uint32_t n, int8_t* q1, int8_t* q2) {
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512 m = _mm512_setzero_ps();
  __mmask16 nonfinite = 0;
  for (uint32_t i = 0; i < n; i += 16) {
    const __mmask16 k = __mmask16(n - i < 16 ? (1u << (n - i)) - 1 : 0xFFFF);
    const __m512 a = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(k, x + i)), absmask));
    nonfinite |= _mm512_cmp_ps_mask(a, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ);
    m = _mm512_max_ps(a, m);  // a NaN never wins
  }
  const float amax = _mm512_reduce_max_ps(m);
  if (nonfinite || amax == 0.f) {
    std::memset(q1, 0, n);
    if (q2) std::memset(q2, 0, n);
    return nonfinite ? std::numeric_limits<float>::quiet_NaN() : 0.f;
  }
  const __m512 inv = _mm512_set1_ps(127.f / amax);
  const __m512 lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  for (uint32_t i = 0; i < n; i += 16) {
    const __mmask16 k = __mmask16(n - i < 16 ? (1u << (n - i)) - 1 : 0xFFFF);
    const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv);
    const __m512 a = _mm512_min_ps(
        _mm512_max_ps(_mm512_roundscale_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), lo),
        hi);
    _mm_mask_storeu_epi8(q1 + i, k, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(a)));
    if (!q2) continue;
    const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_sub_ps(p, a), _mm512_set1_ps(128.f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_mask_storeu_epi8(
        q2 + i, k,
        _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi))));
  }
  return amax;
}

// The query's levels: q1, and q2 with kInt8x2 (else q2 is not written); returns qk.
float QuantizeQueryV(const float* x, uint32_t n, ActPrecision query, int8_t* q1, int8_t* q2) {
  return QueryScoreScale(Levels(x, n, q1, query == ActPrecision::kInt8x2 ? q2 : nullptr), n, query);
}

// Scores of Q queries (L levels each: Q * L <= 4 "streams", stream j level j % L of query
// j / L) for one block of cnt <= 64 rows, in one pass over the block's key columns: each
// quad of columns is made into VNNI operands (KeyQuads) and fed at once to every stream
// and to the column sums, so the operands stay in registers. vpdpbusd takes unsigned
// bytes, so each level goes in as q + 128 and 128 * sum_c key is taken off again (exact).
// qb[j][c / 4]: stream j's bytes c..c+3 plus 128, as one dword.
template <int Q, int L>
inline void BlockOfScores(const int8_t* keys_t, size_t row_stride, size_t r0, __mmask64 m,
                          uint32_t hd, const uint32_t (*qb)[kSimdMaxHeadDim / 4], const float* qk,
                          const float* key_scale, uint32_t cnt, float* const* s, uint32_t idx) {
  constexpr int S = Q * L;
  static_assert(S <= 4, "four streams keep the accumulators in registers");
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i acc[S][4], sum[4];
#pragma GCC unroll 4
  for (int u = 0; u < 4; ++u) {
    sum[u] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < S; ++i) acc[i][u] = _mm512_setzero_si512();
  }
  for (uint32_t c = 0; c < hd; c += 4) {
    __m512i kq[4];
    KeyQuads(keys_t, row_stride, c, r0, m, kq);
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) sum[u] = Dpbusd(sum[u], ones, kq[u]);
#pragma GCC unroll 4
    for (int i = 0; i < S; ++i) {
      const __m512i qv = _mm512_set1_epi32(int(qb[i][c / 4]));
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) acc[i][u] = Dpbusd(acc[i][u], qv, kq[u]);
    }
  }
#pragma GCC unroll 4
  for (int u = 0; u < 4; ++u) sum[u] = _mm512_slli_epi32(sum[u], 7);
#pragma GCC unroll 2
  for (int i = 0; i < Q; ++i) {
    __m512i rows[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      rows[u] = _mm512_sub_epi32(acc[i * L][u], sum[u]);
      if (L == 2)
        rows[u] = _mm512_add_epi32(_mm512_slli_epi32(rows[u], 7),
                                   _mm512_sub_epi32(acc[i * L + 1][u], sum[u]));
    }
    const __m512 qv = _mm512_set1_ps(qk[i]);
    for (uint32_t g = 0; g * 16 < cnt; ++g) {
      const uint32_t n = cnt - g * 16 < 16 ? cnt - g * 16 : 16;
      const __mmask16 mk = __mmask16(n == 16 ? 0xFFFF : (1u << n) - 1);
      const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, key_scale + 16 * g), qv);
      _mm512_mask_storeu_ps(s[i] + idx + 16 * g, mk, _mm512_mul_ps(_mm512_cvtepi32_ps(rows[g]), t));
    }
  }
}

// VNNI scores of Q queries (qb: their level streams, see BlockOfScores) over every row of
// `runs` into s[j][union index], 64 rows at a time: four streams per pass over the block's
// keys (a token's two heads at two levels in one; a prefill block's 8 queries in four,
// the keys then read from L1).
template <int Q, int L>
void QuadScores(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                const float* key_scale, uint32_t hd, const uint32_t (*qb)[kSimdMaxHeadDim / 4],
                const float* qk, float* const* s) {
  constexpr int kQ = 4 / L;  // queries per pass
  uint32_t idx = 0;
  for (int k = 0; k < runs.n; ++k)
    for (uint32_t j = 0; j < runs.count[k]; j += 64) {
      const uint32_t cnt = runs.count[k] - j < 64 ? runs.count[k] - j : 64;
      const __mmask64 m = cnt == 64 ? ~__mmask64(0) : (__mmask64(1) << cnt) - 1;
      const size_t r0 = runs.start[k] + j;
      int i0 = 0;
      for (; i0 + kQ <= Q; i0 += kQ)
        BlockOfScores<kQ, L>(keys_t, row_stride, r0, m, hd, qb + i0 * L, qk + i0, key_scale + r0,
                             cnt, s + i0, idx);
      for (; i0 < Q; ++i0)
        BlockOfScores<1, L>(keys_t, row_stride, r0, m, hd, qb + i0 * L, qk + i0, key_scale + r0,
                            cnt, s + i0, idx);
      idx += cnt;
    }
}

// Scores of Q queries over every row of `runs` into s[j][union index] (hd <= 256).
template <int Q>
void BlockScores(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                 const float* key_scale, uint32_t hd, const float* const* q, ActPrecision query,
                 float* const* s) {
  alignas(64) int8_t q1[kSimdMaxHeadDim + 4], q2[kSimdMaxHeadDim + 4];
  alignas(64) uint32_t qb[2 * Q][kSimdMaxHeadDim / 4];
  float qk[Q];
  const bool two = query == ActPrecision::kInt8x2;
  const int L = two ? 2 : 1;
  for (int i = 0; i < Q; ++i) {
    qk[i] = QuantizeQueryV(q[i], hd, query, q1, q2);
    std::memset(q1 + hd, 0, 4);
    std::memset(q2 + hd, 0, 4);
    // The dwords' bytes in memory order (x86 is little-endian): byte c is level c + 128.
    for (int l = 0; l < L; ++l) {
      const int8_t* lv = l == 0 ? q1 : q2;
      uint8_t* bytes = reinterpret_cast<uint8_t*>(qb[i * L + l]);
      for (uint32_t c = 0; c < (hd + 3) / 4 * 4; ++c) bytes[c] = uint8_t(lv[c] + 128);
    }
  }
  if (two)
    QuadScores<Q, 2>(runs, keys_t, row_stride, key_scale, hd, qb, qk, s);
  else
    QuadScores<Q, 1>(runs, keys_t, row_stride, key_scale, hd, qb, qk, s);
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

// Each head's weights w[u] = (p[u] * inv) * value_scale[row of u], in place over the
// softmax numerators of every row of `runs`.
template <int H>
void RowWeights(const AttentionRuns& runs, const float* value_scale, float* const* p,
                const float* inv) {
  uint32_t idx = 0;
  for (int k = 0; k < runs.n; ++k) {
    for (int h = 0; h < H; ++h)
      Weights(p[h] + idx, inv[h], value_scale + runs.start[k], runs.count[k], p[h] + idx);
    idx += runs.count[k];
  }
}

inline __m512 LoadI8Full(const int8_t* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// Weighted values of H (1 or 2) heads for dimensions [16 v0, 16 (v0 + NV)): lanes =
// dimensions, an fma chain over rows in order per head (w: RowWeights); each value row is
// converted once for both heads. NV is a compile-time count so the accumulators stay in
// registers; Full: no masked tail.
template <int H, int NV, bool Full>
void ValuesPass(const AttentionRuns& runs, const int8_t* values, uint32_t hd, uint32_t v0,
                const float* const* w, float* const* out) {
  const uint32_t nvec = (hd + 15) / 16;
  const __mmask16 last = __mmask16(hd % 16 ? (1u << (hd % 16)) - 1 : 0xFFFF);
  __mmask16 m[NV];
  for (int v = 0; v < NV; ++v) m[v] = v0 + v + 1 == nvec ? last : 0xFFFF;
  __m512 acc[H][NV];
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < NV; ++v) acc[h][v] = _mm512_setzero_ps();
  uint32_t id = 0;
  for (int k = 0; k < runs.n; ++k) {
    const int8_t* vr = values + runs.start[k] * hd + 16 * v0;
    for (uint32_t j = 0; j < runs.count[k]; ++j, ++id, vr += hd) {
      __m512 wv[H];
      for (int h = 0; h < H; ++h) wv[h] = _mm512_set1_ps(w[h][id]);
      for (int v = 0; v < NV; ++v) {
        const __m512 x = Full ? LoadI8Full(vr + 16 * v) : LoadI8(vr + 16 * v, m[v]);
        for (int h = 0; h < H; ++h) acc[h][v] = _mm512_fmadd_ps(wv[h], x, acc[h][v]);
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out[h] + 16 * (v0 + v), m[v], acc[h][v]);
}

template <int H>
void Values(const AttentionRuns& runs, const int8_t* values, uint32_t hd, const float* const* w,
            float* const* out) {
  const uint32_t nvec = (hd + 15) / 16;
  uint32_t v0 = 0;
  if (hd % 16 == 0) {
    for (; v0 + 4 <= nvec; v0 += 4) ValuesPass<H, 4, true>(runs, values, hd, v0, w, out);
  } else {
    for (; v0 + 4 <= nvec; v0 += 4) ValuesPass<H, 4, false>(runs, values, hd, v0, w, out);
  }
  switch (nvec - v0) {
    case 3:
      return ValuesPass<H, 3, false>(runs, values, hd, v0, w, out);
    case 2:
      return ValuesPass<H, 2, false>(runs, values, hd, v0, w, out);
    case 1:
      return ValuesPass<H, 1, false>(runs, values, hd, v0, w, out);
    default:
      return;
  }
}

// One token's heads, two at a time: integer scores, softmax, weights, then the values.
void AttendV(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
             const float* key_scale, const int8_t* values, const float* value_scale, uint32_t hd,
             const float* q, uint32_t n_q, ActPrecision query, float* out, float* scratch) {
  const uint32_t total = runs.total();
  for (uint32_t i0 = 0; i0 < n_q; i0 += 2) {
    const uint32_t nh = n_q - i0 >= 2 ? 2 : 1;
    const float* qs[2] = {q + size_t(i0) * hd, q + size_t(i0 + nh - 1) * hd};
    float* ss[2] = {scratch + size_t(i0) * total, scratch + size_t(i0 + nh - 1) * total};
    float* os[2] = {out + size_t(i0) * hd, out + size_t(i0 + nh - 1) * hd};
    const float* ws[2] = {ss[0], ss[1]};
    float inv[2];
    if (nh == 2) {
      BlockScores<2>(runs, keys_t, row_stride, key_scale, hd, qs, query, ss);
      inv[0] = SoftmaxInPlace(ss[0], total);
      inv[1] = SoftmaxInPlace(ss[1], total);
      RowWeights<2>(runs, value_scale, ss, inv);
      Values<2>(runs, values, hd, ws, os);
    } else {
      BlockScores<1>(runs, keys_t, row_stride, key_scale, hd, qs, query, ss);
      inv[0] = SoftmaxInPlace(ss[0], total);
      RowWeights<1>(runs, value_scale, ss, inv);
      Values<1>(runs, values, hd, ws, os);
    }
  }
}

void QuantizeV(const float* x, uint32_t n, int8_t* q, float* scale) {
  *scale = Levels(x, n, q, nullptr) / 127.f;  // (NaN stays NaN, 0 stays 0)
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
