// AVX2 + FMA versions of the fast-path numeric kernels, for CPUs without AVX-512 (Zen 2-4,
// Intel client cores): the same operations as the scalar definitions in fast_ops.cc, lane
// by lane, so the results are bit-identical. AVX2 has no byte masks: partial vectors go
// through small zero-padded buffers, so nothing is read or written past the caller's data.
#include <immintrin.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/kernels/fast_ops_table.h"

namespace cact::kernels::internal {
namespace {

inline __m256 Exp8(__m256 x) {
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 y = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), y);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpC[6]);
  for (int k = 5; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC[k]));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_blendv_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), x, nan);
}

// Lanes [0, n) set (n <= 8), as a blend/and mask.
inline __m256 LaneMask(uint32_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), idx));
}

// The first n (< 8) floats, the rest 0 / stored back.
inline __m256 LoadPart(const float* p, uint32_t n) {
  alignas(32) float b[8] = {};
  std::memcpy(b, p, n * sizeof(float));
  return _mm256_load_ps(b);
}
inline void StorePart(float* p, uint32_t n, __m256 v) {
  alignas(32) float b[8];
  _mm256_store_ps(b, v);
  std::memcpy(p, b, n * sizeof(float));
}
inline __m256 Load(const float* p, uint32_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : LoadPart(p, n);
}
inline void Store(float* p, uint32_t n, __m256 v) {
  if (n >= 8)
    _mm256_storeu_ps(p, v);
  else
    StorePart(p, n, v);
}

// Eight int8 as floats; n < 8 reads only n bytes (the rest 0).
inline __m256 LoadI8(const int8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 LoadI8(const int8_t* p, uint32_t n) {
  if (n >= 8) return LoadI8(p);
  int8_t b[8] = {};
  std::memcpy(b, p, n);
  return LoadI8(b);
}

// The quad-layout dwords (fast_ops.h, KeyOffset) of 8 rows: each row's four bytes of one
// quad group; n < 8: the first n rows, the rest 0.
inline __m256i LoadKeyQuads(const int8_t* quad_rows, uint32_t n) {
  if (n >= 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad_rows));
  alignas(32) int8_t b[32] = {};
  std::memcpy(b, quad_rows, 4 * n);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
}
// Key column c of those rows as floats: byte c % 4 of each dword, shifted to the top and
// back down with its sign.
inline __m256 KeyColumn(__m256i quads, uint32_t c) {
  const __m128i up = _mm_cvtsi32_si128(int(24 - 8 * (c % 4)));
  return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sll_epi32(quads, up), 24));
}

template <typename F>
inline void Map(float* x, size_t n, F f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) StorePart(x + i, uint32_t(n - i), f(LoadPart(x + i, uint32_t(n - i))));
}

void ExpV(float* x, size_t n) { Map(x, n, Exp8); }
inline __m256 Negate(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.f)); }
void SigmoidV(float* x, size_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  Map(x, n, [&](__m256 v) { return _mm256_div_ps(one, _mm256_add_ps(one, Exp8(Negate(v)))); });
}
void SiluV(float* x, size_t n) {
  const __m256 one = _mm256_set1_ps(1.f);
  Map(x, n, [&](__m256 v) { return _mm256_div_ps(v, _mm256_add_ps(one, Exp8(Negate(v)))); });
}

// Butterflies h = 1, 2, 4 inside each 8-lane vector as fma(v, +-1, partner) (exact: one
// rounding of a + b or a - b), then h >= 8 across vectors; n is a multiple of 16.
void FwhtV(float* x, uint32_t n) {
  const __m256 s1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
  const __m256 s2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
  const __m256 s4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
  for (uint32_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    v = _mm256_fmadd_ps(v, s1, _mm256_permute_ps(v, 0xB1));
    v = _mm256_fmadd_ps(v, s2, _mm256_permute_ps(v, 0x4E));
    v = _mm256_fmadd_ps(v, s4, _mm256_permute2f128_ps(v, v, 0x01));
    _mm256_storeu_ps(x + i, v);
  }
  for (uint32_t h = 8; h < n; h <<= 1)
    for (uint32_t i = 0; i < n; i += 2 * h)
      for (uint32_t j = i; j < i + h; j += 8) {
        const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
        _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
      }
  const __m256 s = _mm256_set1_ps(1.0f / float(std::sqrt(double(n))));
  for (uint32_t i = 0; i < n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
}

inline float ReduceMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// Softmax of one head's `total` (> 0) scores in place: max (exact in any order), exp, the
// 16 strided partial sums as two vectors (t % 16 < 8, >= 8) and the scalar code's tree;
// returns 1 / sum.
inline float SoftmaxInPlace(float* s, uint32_t total) {
  __m256 mv = _mm256_set1_ps(s[0]);
  uint32_t t = 0;
  for (; t + 8 <= total; t += 8) mv = _mm256_max_ps(_mm256_loadu_ps(s + t), mv);
  if (t < total) {  // the padding lanes hold s[0]: a candidate already
    alignas(32) float b[8];
    for (int k = 0; k < 8; ++k) b[k] = s[0];
    std::memcpy(b, s + t, (total - t) * sizeof(float));
    mv = _mm256_max_ps(_mm256_load_ps(b), mv);
  }
  const __m256 mx = _mm256_set1_ps(ReduceMax(mv));
  __m256 part[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (t = 0; t < total; t += 8) {
    const uint32_t cnt = total - t < 8 ? total - t : 8;
    __m256 e = Exp8(_mm256_sub_ps(Load(s + t, cnt), mx));
    Store(s + t, cnt, e);
    if (cnt < 8) e = _mm256_and_ps(e, LaneMask(cnt));  // + 0 leaves a partial sum as it is
    part[(t / 8) & 1] = _mm256_add_ps(part[(t / 8) & 1], e);
  }
  __m256 p = _mm256_add_ps(part[0], part[1]);
  p = _mm256_add_ps(p, _mm256_permute2f128_ps(p, p, 0x01));
  p = _mm256_add_ps(p, _mm256_permute_ps(p, 0x4E));
  p = _mm256_add_ps(p, _mm256_permute_ps(p, 0xB1));
  return 1.f / _mm256_cvtss_f32(p);
}

// The int8 levels of x (fast_ops.h): q1 = clamp(nearbyint(x * (127 / amax)), +-127), and
// when q2 is given the residual level in 1/128 steps. Returns amax = max |x[i]|, or NaN if
// some x[i] is a NaN or an infinity; both then, and for an all-zero x, give zero levels.
float Levels(const float* x, uint32_t n, int8_t* q1, int8_t* q2) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps(), nonfinite = _mm256_setzero_ps();
  for (uint32_t i = 0; i < n; i += 8) {
    const __m256 a = _mm256_and_ps(Load(x + i, n - i), absmask);  // padding: 0
    nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));
    m = _mm256_max_ps(a, m);  // a NaN never wins
  }
  const float amax = ReduceMax(m);
  const bool bad = _mm256_movemask_ps(nonfinite) != 0;
  if (bad || amax == 0.f) {
    std::memset(q1, 0, n);
    if (q2) std::memset(q2, 0, n);
    return bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
  }
  const __m256 inv = _mm256_set1_ps(127.f / amax);
  const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  for (uint32_t i = 0; i < n; i += 8) {
    const uint32_t cnt = n - i < 8 ? n - i : 8;
    const __m256 p = _mm256_mul_ps(Load(x + i, cnt), inv);
    const __m256 a = _mm256_min_ps(
        _mm256_max_ps(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), lo), hi);
    alignas(32) int32_t b[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(b), _mm256_cvtps_epi32(a));
    for (uint32_t e = 0; e < cnt; ++e) q1[i + e] = int8_t(b[e]);
    if (!q2) continue;
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(p, a), _mm256_set1_ps(128.f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_store_si256(reinterpret_cast<__m256i*>(b),
                       _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi)));
    for (uint32_t e = 0; e < cnt; ++e) q2[i + e] = int8_t(b[e]);
  }
  return amax;
}

// The query's levels: q1, and q2 with kInt8x2 (else q2 is not written); returns qk.
float QuantizeQueryV(const float* x, uint32_t n, ActPrecision query, int8_t* q1, int8_t* q2) {
  return QueryScoreScale(Levels(x, n, q1, query == ActPrecision::kInt8x2 ? q2 : nullptr), n, query);
}

// R vectors of 8 rows from r0 (cnt < 8: one partial vector): the integer dots of Q queries
// as fma chains over float copies of the int8 keys and of each query's integer levels,
// combined (q1, or 128 q1 + q2 with two levels), then the scores. Every product and partial
// sum is an integer below 2^24, so each is exact and the dot is the integer one the other
// ISAs compute: one level, |q1 k| <= 127 * 127 over at most 256 columns; two levels,
// |(128 q1 + q2) k| <= 16383 * 127, so the chains restart every 8 columns into int32 sums.
template <int Q, int L, int R>
inline void ScoreBlock(const int8_t* keys_t, size_t row_stride, const float* key_scale, uint32_t hd,
                       const float (*lv)[kSimdMaxHeadDim], const float* qk, size_t r0, uint32_t cnt,
                       float* const* s, uint32_t idx) {
  constexpr uint32_t kSpan = L == 2 ? 8 : kSimdMaxHeadDim;  // columns per exact chain
  __m256 a[Q][R];
  __m256i d[Q][R];
  for (int i = 0; i < Q; ++i)
    for (int v = 0; v < R; ++v) d[i][v] = _mm256_setzero_si256();
  for (uint32_t c0 = 0; c0 < hd; c0 += kSpan) {
    for (int i = 0; i < Q; ++i)
      for (int v = 0; v < R; ++v) a[i][v] = _mm256_setzero_ps();
    // A quad group (four columns) of the R vectors is loaded once (kSpan is a multiple of 4).
    for (uint32_t c4 = c0; c4 < hd && c4 < c0 + kSpan; c4 += 4) {
      const int8_t* kc = keys_t + KeyOffset(c4, r0, row_stride);
      __m256i quads[R];
      for (int v = 0; v < R; ++v) quads[v] = LoadKeyQuads(kc + 32 * v, cnt);
      for (uint32_t c = c4; c < c4 + 4 && c < hd; ++c) {
        __m256 kv[R];
        for (int v = 0; v < R; ++v) kv[v] = KeyColumn(quads[v], c);
        for (int i = 0; i < Q; ++i) {
          const __m256 qi = _mm256_set1_ps(lv[i][c]);
          for (int v = 0; v < R; ++v) a[i][v] = _mm256_fmadd_ps(qi, kv[v], a[i][v]);
        }
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int v = 0; v < R; ++v) d[i][v] = _mm256_add_epi32(d[i][v], _mm256_cvtps_epi32(a[i][v]));
  }
  for (int v = 0; v < R; ++v) {
    const uint32_t n = cnt < 8 ? cnt : 8;
    const __m256 ks = Load(key_scale + r0 + 8 * v, n);
    for (int i = 0; i < Q; ++i)
      Store(s[i] + idx + 8 * v, n,
            _mm256_mul_ps(_mm256_cvtepi32_ps(d[i][v]), _mm256_mul_ps(ks, _mm256_set1_ps(qk[i]))));
  }
}

// Scores of Q quantized queries (L levels each, combined in lv) over every row of `runs`
// into s[i][union index]: lanes = rows; blocks of R vectors, then the rest 8 rows or fewer
// at a time.
template <int Q, int L, int R>
void Scores(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
            const float* key_scale, uint32_t hd, const float (*lv)[kSimdMaxHeadDim],
            const float* qk, float* const* s) {
  uint32_t idx = 0;
  for (int k = 0; k < runs.n; ++k) {
    uint32_t j = 0;
    for (; j + 8 * R <= runs.count[k]; j += 8 * R, idx += 8 * R)
      ScoreBlock<Q, L, R>(keys_t, row_stride, key_scale, hd, lv, qk, runs.start[k] + j, 8, s, idx);
    for (; j < runs.count[k]; j += 8) {
      const uint32_t cnt = runs.count[k] - j < 8 ? runs.count[k] - j : 8;
      ScoreBlock<Q, L, 1>(keys_t, row_stride, key_scale, hd, lv, qk, runs.start[k] + j, cnt, s,
                          idx);
      idx += cnt;
    }
  }
}

// out[i][c0, c0 + 8V) = sum over the rows query i sees (bit i of vis[union index]; vis ==
// nullptr: all) of w[i][row] * value row, an fma chain over rows in order per query; lanes
// = dimensions. cnt < 8 (V == 1 only): the last, partial vector.
template <int Q, int V>
void ValueColumns(const AttentionRuns& runs, const int8_t* values, uint32_t hd, uint32_t c0,
                  uint32_t cnt, const float* const* w, const uint8_t* vis, float* const* out) {
  constexpr uint8_t kAll = uint8_t((1u << Q) - 1);
  __m256 a[Q][V];
  for (int i = 0; i < Q; ++i)
    for (int v = 0; v < V; ++v) a[i][v] = _mm256_setzero_ps();
  uint32_t u = 0;
  for (int k = 0; k < runs.n; ++k)
    for (uint32_t j = 0; j < runs.count[k]; ++j, ++u) {
      const int8_t* row = values + (runs.start[k] + j) * hd + c0;
      __m256 x[V];
      for (int v = 0; v < V; ++v) x[v] = V == 1 ? LoadI8(row, cnt) : LoadI8(row + 8 * v);
      const uint8_t seen = vis ? uint8_t(vis[u] & kAll) : kAll;
      for (int i = 0; i < Q; ++i) {
        if (seen != kAll && !((seen >> i) & 1)) continue;
        const __m256 wi = _mm256_set1_ps(w[i][u]);
        for (int v = 0; v < V; ++v) a[i][v] = _mm256_fmadd_ps(wi, x[v], a[i][v]);
      }
    }
  for (int i = 0; i < Q; ++i)
    for (int v = 0; v < V; ++v) Store(out[i] + c0 + 8 * v, V == 1 ? cnt : 8, a[i][v]);
}

// Vectors per pass (of rows in the scores, of dimensions in the values): Q x that many
// independent fma chains, about 8.
template <int Q>
constexpr int kVectorsPerPass = Q <= 2   ? 4
                                : Q <= 4 ? 2
                                         : 1;

template <int Q>
void BlockScores(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                 const float* key_scale, uint32_t hd, const float* const* q, ActPrecision query,
                 float* const* s) {
  int8_t q1[kSimdMaxHeadDim], q2[kSimdMaxHeadDim];
  float lv[Q][kSimdMaxHeadDim];  // q1, or 128 q1 + q2 (exact in a float)
  float qk[Q];
  const bool two = query == ActPrecision::kInt8x2;
  for (int i = 0; i < Q; ++i) {
    qk[i] = QuantizeQueryV(q[i], hd, query, q1, q2);
    for (uint32_t c = 0; c < hd; ++c)
      lv[i][c] = two ? float(128 * int32_t(q1[c]) + q2[c]) : float(q1[c]);
  }
  // Two levels keep int32 sums beside the chains: fewer row vectors per pass.
  if (two)
    Scores<Q, 2, kVectorsPerPass<2 * Q>>(runs, keys_t, row_stride, key_scale, hd, lv, qk, s);
  else
    Scores<Q, 1, kVectorsPerPass<Q>>(runs, keys_t, row_stride, key_scale, hd, lv, qk, s);
}

template <int Q>
void BlockValues(const AttentionRuns& runs, const int8_t* values, uint32_t hd,
                 const float* const* w, const uint8_t* vis, float* const* out) {
  constexpr int V = kVectorsPerPass<Q>;
  uint32_t c0 = 0;
  for (; c0 + 8 * V <= hd; c0 += 8 * V) ValueColumns<Q, V>(runs, values, hd, c0, 8, w, vis, out);
  for (; c0 < hd; c0 += 8)
    ValueColumns<Q, 1>(runs, values, hd, c0, hd - c0 < 8 ? hd - c0 : 8, w, vis, out);
}

// Weights w[u] = (p * inv) * vs[u] for n rows (p: the softmax numerators), as the scalar code.
inline void Weights(const float* p, float inv, const float* vs, uint32_t n, float* w) {
  const __m256 iv = _mm256_set1_ps(inv);
  for (uint32_t k = 0; k < n; k += 8) {
    const uint32_t cnt = n - k < 8 ? n - k : 8;
    Store(w + k, cnt, _mm256_mul_ps(_mm256_mul_ps(Load(p + k, cnt), iv), Load(vs + k, cnt)));
  }
}

#include "engine/kernels/fast_ops_block_impl.h"

// One token's heads, up to 8 at a time, over the same rows: scores, softmax, the weights
// (written over the scores), then the values.
void AttendV(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
             const float* key_scale, const int8_t* values, const float* value_scale, uint32_t hd,
             const float* q, uint32_t n_q, ActPrecision query, float* out, float* scratch) {
  const uint32_t total = runs.total();
  for (uint32_t i0 = 0; i0 < n_q; i0 += 8) {
    const uint32_t nq = n_q - i0 < 8 ? n_q - i0 : 8;
    WithQueries(nq, [&](auto qn) {
      constexpr int Q = decltype(qn)::value;
      const float* qs[Q];
      float* s[Q];
      float* os[Q];
      for (int i = 0; i < Q; ++i) {
        qs[i] = q + size_t(i0 + i) * hd;
        s[i] = scratch + size_t(i0 + i) * total;
        os[i] = out + size_t(i0 + i) * hd;
      }
      BlockScores<Q>(runs, keys_t, row_stride, key_scale, hd, qs, query, s);
      for (int i = 0; i < Q; ++i) {
        const float inv = SoftmaxInPlace(s[i], total);
        for (int k = 0, u = 0; k < runs.n; u += runs.count[k], ++k)
          Weights(s[i] + u, inv, value_scale + runs.start[k], runs.count[k], s[i] + u);
      }
      BlockValues<Q>(runs, values, hd, s, nullptr, os);
    });
  }
}

void QuantizeV(const float* x, uint32_t n, int8_t* q, float* scale) {
  *scale = Levels(x, n, q, nullptr) / 127.f;  // (NaN stays NaN, 0 stays 0)
}

void MixV(const float* P, const float* X, const float* h, const float* x, const float* u,
          uint32_t m, uint32_t d, float* out) {
  for (uint32_t c = 0; c < d; c += 8) {
    const uint32_t cnt = d - c < 8 ? d - c : 8;
    const __m256 delta = _mm256_sub_ps(Load(x + c, cnt), Load(u + c, cnt));
    __m256 xj[8];
    for (uint32_t j = 0; j < m && j < 8; ++j) xj[j] = Load(X + size_t(j) * d + c, cnt);
    for (uint32_t i = 0; i < m; ++i) {
      __m256 acc = _mm256_setzero_ps();
      for (uint32_t j = 0; j < m; ++j)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(P[i * m + j]),
                              j < 8 ? xj[j] : Load(X + size_t(j) * d + c, cnt), acc);
      Store(out + size_t(i) * d + c, cnt, _mm256_fmadd_ps(_mm256_set1_ps(h[i]), delta, acc));
    }
  }
}

}  // namespace

const FastOpsTable& Avx2FastOps() {
  static const FastOpsTable t = {ExpV,    SigmoidV,     SiluV,     FwhtV,
                                 AttendV, AttendBlockV, QuantizeV, MixV};
  return t;
}

}  // namespace cact::kernels::internal
