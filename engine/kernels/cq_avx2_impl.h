// AVX2 CQ kernels, shared by cq_avx2.cc (maddubs with the sign trick) and cq_avxvnni.cc
// (vpdpbusd with the +128 codebook offset). Same structure as the AVX-512 kernels with 8
// rows per block and 32-byte chunks; see cq_avx512_impl.h for the scheme.
//
// Everything here lives in an anonymous namespace: the two including files are compiled
// with different ISA flags and must not share (ODR-merge) any function.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/kernels/kernel_table.h"
#include "engine/kernels/scratch.h"

namespace cact::kernels::internal {
namespace {

// ------------------------------------------------------------------ activation prepare

inline __m256 InRegisterFwht8(__m256 v) {
  const __m256 s1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
  const __m256 s2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
  const __m256 s4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
  v = _mm256_fmadd_ps(v, s1, _mm256_permute_ps(v, 0xB1));
  v = _mm256_fmadd_ps(v, s2, _mm256_permute_ps(v, 0x4E));
  v = _mm256_fmadd_ps(v, s4, _mm256_permute2f128_ps(v, v, 0x01));
  return v;
}

inline int32_t HorizontalSum(__m256i v) {
  alignas(32) int32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  int32_t s = 0;
  for (int32_t x : l) s += x;
  return s;
}

// The permuted layouts (ActivationBatch perm4 / perm2; the definitions are
// BuildPermutedLayoutsScalar's). `nat`: the natural bytes held (in_pad rounded up to 64,
// zero past in_pad); past them the layouts hold 0.
inline __m256i LoadNatural(const int8_t* q, uint32_t off, uint32_t nat) {
  return off < nat ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + off))
                   : _mm256_setzero_si256();
}

// Per 128 bytes: the even bytes, then the odd ones.
void BuildPerm4Avx2(const int8_t* q, uint32_t in_pad, int8_t* out) {
  const uint32_t nat = (in_pad + 63) / 64 * 64;
  const __m256i lo = _mm256_set1_epi16(0x00FF);
  for (uint32_t c = 0; c * 128 < in_pad; ++c)
    for (uint32_t h = 0; h < 2; ++h) {  // 64 input bytes -> 32 even and 32 odd
      const uint32_t off = 128 * c + 64 * h;
      const __m256i x0 = LoadNatural(q, off, nat), x1 = LoadNatural(q, off + 32, nat);
      const __m256i even = _mm256_packus_epi16(_mm256_and_si256(x0, lo), _mm256_and_si256(x1, lo));
      const __m256i odd = _mm256_packus_epi16(_mm256_srli_epi16(x0, 8), _mm256_srli_epi16(x1, 8));
      int8_t* o = out + 128 * c + 32 * h;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute4x64_epi64(even, 0xD8));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64), _mm256_permute4x64_epi64(odd, 0xD8));
    }
}

// Per 256 bytes (sixteen 16-byte rows m): byte 16m + 4b + s goes to 64s + 4m + b, i.e.
// each row's bytes are transposed 4 x 4 in place, then dword (m, s) moves to (s, m).
void BuildPerm2Avx2(const int8_t* q, uint32_t in_pad, int8_t* out) {
  const uint32_t nat = (in_pad + 63) / 64 * 64;
  const __m256i tr = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m256i pairs = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (uint32_t c = 0; c * 256 < in_pad; ++c) {
    __m256i y[8];  // y[i]: rows 2i, 2i + 1; after the shuffles qword s = (row 2i, row 2i + 1) of s
    for (int i = 0; i < 8; ++i)
      y[i] = _mm256_permutevar8x32_epi32(
          _mm256_shuffle_epi8(LoadNatural(q, 256 * c + 32 * i, nat), tr), pairs);
    int8_t* o = out + 256 * c;
    for (int half = 0; half < 2; ++half) {  // rows 0-7, then 8-15: a 4 x 4 qword transpose
      const __m256i* v = y + 4 * half;
      const __m256i l01 = _mm256_unpacklo_epi64(v[0], v[1]),
                    h01 = _mm256_unpackhi_epi64(v[0], v[1]);
      const __m256i l23 = _mm256_unpacklo_epi64(v[2], v[3]),
                    h23 = _mm256_unpackhi_epi64(v[2], v[3]);
      const __m256i s[4] = {
          _mm256_permute2x128_si256(l01, l23, 0x20), _mm256_permute2x128_si256(h01, h23, 0x20),
          _mm256_permute2x128_si256(l01, l23, 0x31), _mm256_permute2x128_si256(h01, h23, 0x31)};
      for (int k = 0; k < 4; ++k)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * k + 32 * half), s[k]);
    }
  }
}

void PrepareAvx2(const float* x, ActivationBatch* a, uint32_t t) {
  const uint32_t n = a->group(), in = a->in(), nv = n / 8;
  const bool two = a->two_level();
  int8_t* q1 = a->mutable_natural(t, 0);
  int8_t* q2 = a->mutable_natural(t, 1);
  float* scale = a->mutable_scale(t);
  const float factor = ActScaleFactor(n);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 fmax = _mm256_set1_ps(FLT_MAX);
  __m256 v[64];
  for (uint32_t g = 0; g < a->groups(); ++g) {
    const uint32_t base = g * n;
    for (uint32_t i = 0; i < nv; ++i) {
      uint32_t k = base + 8 * i;
      __m256 xi;
      if (k + 8 <= in) {
        xi = _mm256_loadu_ps(x + k);
      } else {
        alignas(32) float tmp[8] = {};
        for (uint32_t j = 0; k + j < in && j < 8; ++j) tmp[j] = x[k + j];
        xi = _mm256_load_ps(tmp);
      }
      v[i] = InRegisterFwht8(xi);
    }
    for (uint32_t h = 1; h < nv; h <<= 1)
      for (uint32_t i = 0; i < nv; i += 2 * h)
        for (uint32_t j = i; j < i + h; ++j) {
          __m256 p = v[j], r = v[j + h];
          v[j] = _mm256_add_ps(p, r);
          v[j + h] = _mm256_sub_ps(p, r);
        }
    __m256 m = _mm256_setzero_ps();
    int bad = 0;
    for (uint32_t i = 0; i < nv; ++i) {
      __m256 av = _mm256_and_ps(v[i], absmask);
      bad |= _mm256_movemask_ps(_mm256_cmp_ps(av, fmax, _CMP_NLE_UQ));
      m = _mm256_max_ps(av, m);  // NaN in av never wins
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    float amax = 0.f;
    for (float l : lanes) amax = l > amax ? l : amax;
    if (bad || amax == 0.f) {
      std::memset(q1 + base, 0, n);
      if (two) std::memset(q2 + base, 0, n);
      scale[g] = bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
      a->mutable_sum(t, 0)[g] = 0;
      if (two) a->mutable_sum(t, 1)[g] = 0;
      continue;
    }
    const __m256 inv = _mm256_set1_ps(127.f / amax);
    const __m256 k128 = _mm256_set1_ps(128.f);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i s1 = _mm256_setzero_si256(), s2 = _mm256_setzero_si256();
    for (uint32_t i = 0; i < nv; i += 4) {
      __m256i r[4], r2[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 p = _mm256_mul_ps(v[i + j], inv);
        r[j] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(p), lo), hi);  // nearest even
        s1 = _mm256_add_epi32(s1, r[j]);
        if (two) {
          const __m256 res = _mm256_mul_ps(_mm256_sub_ps(p, _mm256_cvtepi32_ps(r[j])), k128);
          r2[j] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(res), lo), hi);
          s2 = _mm256_add_epi32(s2, r2[j]);
        }
      }
      __m256i b =
          _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q1 + base + 8 * i),
                          _mm256_permutevar8x32_epi32(b, order));
      if (two) {
        __m256i b2 =
            _mm256_packs_epi16(_mm256_packs_epi32(r2[0], r2[1]), _mm256_packs_epi32(r2[2], r2[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q2 + base + 8 * i),
                            _mm256_permutevar8x32_epi32(b2, order));
      }
    }
    scale[g] = amax * factor;
    a->mutable_sum(t, 0)[g] = HorizontalSum(s1);
    if (two) a->mutable_sum(t, 1)[g] = HorizontalSum(s2);
  }
  for (int level = 0; level < (two ? 2 : 1); ++level) {
    int8_t* q = a->mutable_natural(t, level);
    for (uint32_t k = a->in_pad(); k % 64; ++k) q[k] = 0;
    if (a->layouts() & kLayoutPerm2) BuildPerm2Avx2(q, a->in_pad(), a->mutable_perm2(t, level));
    if (a->layouts() & kLayoutPerm4) BuildPerm4Avx2(q, a->in_pad(), a->mutable_perm4(t, level));
  }
}

// ------------------------------------------------------------------ code expansion

// Dword-granular load of `bytes` (a multiple of 4, <= 32) bytes; never reads past them.
inline __m256i LoadChunk8(const uint8_t* p, uint32_t bytes) {
  if (bytes == 32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(bytes / 4)), idx);
  return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask);
}

template <int kCodeBits>
struct Codes256;

template <>
struct Codes256<2> {
  static constexpr uint32_t kChunkCodes = 128, kChunkBytes = 32, kSub = 4, kUnitCodes = 16;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s, int l) {
    return a.perm2(t, l) + 256 * (c / 2) + 64 * s + 32 * (c % 2);
  }
  static inline __m256i Load(const uint8_t* p, uint32_t bytes) { return LoadChunk8(p, bytes); }
  static inline void Indices(__m256i p, __m256i* idx) {
    const __m256i m3 = _mm256_set1_epi8(3);
    idx[0] = _mm256_and_si256(p, m3);
    idx[1] = _mm256_and_si256(_mm256_srli_epi16(p, 2), m3);
    idx[2] = _mm256_and_si256(_mm256_srli_epi16(p, 4), m3);
    idx[3] = _mm256_and_si256(_mm256_srli_epi16(p, 6), m3);
  }
};

template <>
struct Codes256<4> {
  static constexpr uint32_t kChunkCodes = 64, kChunkBytes = 32, kSub = 2, kUnitCodes = 8;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s, int l) {
    return a.perm4(t, l) + 128 * (c / 2) + 64 * s + 32 * (c % 2);
  }
  static inline __m256i Load(const uint8_t* p, uint32_t bytes) { return LoadChunk8(p, bytes); }
  static inline void Indices(__m256i p, __m256i* idx) {
    const __m256i m15 = _mm256_set1_epi8(15);
    idx[0] = _mm256_and_si256(p, m15);
    idx[1] = _mm256_and_si256(_mm256_srli_epi16(p, 4), m15);
  }
};

template <>
struct Codes256<3> {  // 12 packed bytes -> 32 codes in natural order
  static constexpr uint32_t kChunkCodes = 32, kChunkBytes = 12, kSub = 1, kUnitCodes = 4;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t, int l) {
    return a.natural(t, l) + 32 * c;
  }
  static inline __m256i Load(const uint8_t* p, uint32_t) {
    __m128i v = _mm_maskload_epi32(reinterpret_cast<const int*>(p), _mm_setr_epi32(-1, -1, -1, 0));
    return _mm256_broadcastsi128_si256(v);
  }
  static inline void Indices(__m256i p, __m256i* idx) {
    // Lane L handles packed bytes 6L..6L+5. Word i = bytes floor(3i/8) and the next, then
    // shifted right by 3i mod 8 (a multiply by 2^(8 - shift) and a shift right by 8).
    const __m256i ca = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3)),
        _mm256_setr_epi32(0, 0, 0, 0, 0x06060606, 0x06060606, 0x06060606, 0x06060606));
    const __m256i cb = _mm256_add_epi8(ca, _mm256_set1_epi8(3));
    const __m256i mul = _mm256_broadcastsi128_si256(_mm_setr_epi16(256, 32, 4, 128, 16, 2, 64, 8));
    __m256i lo = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(p, ca), mul), 8);
    __m256i hi = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(p, cb), mul), 8);
    idx[0] = _mm256_and_si256(_mm256_packus_epi16(lo, hi), _mm256_set1_epi8(7));
  }
};

// The byte table: values + 128 (unsigned, for vpdpbusd) or the signed values (sign trick).
template <bool kVnni>
inline __m256i Lut(const int8_t* values) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  if (kVnni) v = _mm_xor_si128(v, _mm_set1_epi8(char(0x80)));  // + 128 mod 256
  return _mm256_broadcastsi128_si256(v);
}

// acc += dot of 4-byte runs of w (codebook bytes) and x (int8 activations).
template <bool kVnni>
inline __m256i DotAcc(__m256i acc, __m256i w, __m256i x) {
  if constexpr (kVnni) {
#ifdef __AVXVNNI__
    return _mm256_dpbusd_avx_epi32(acc, w, x);
#else
    static_assert(!kVnni, "AVX-VNNI kernels need -mavxvnni");
    return acc;
#endif
  } else {
    // |w| * (x * sign(w)) never saturates the 16-bit pair sums: 2 * 127 * 127 < 32767.
    __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
}

// What the +128 offsets (VNNI only) added to the combined dot of group g, modulo 2^32.
template <bool kVnni, bool kRes, bool kLo>
inline int32_t OffsetCorrection8(const ActivationBatch& a, uint32_t t, uint32_t g) {
  if (!kVnni) return 0;
  const uint32_t M = kRes || kLo ? 128 : 1;
  uint32_t s1 = uint32_t(a.sum(t, 0)[g]);
  uint32_t c = M * 128u * s1;
  if (kRes) c += 128u * uint32_t(a.sum(t, 1)[g]);
  if (kLo) c += 128u * s1;
  return int32_t(c);
}

// ------------------------------------------------------------------ reductions (8 rows)

inline void Reduce8(const __m256i* acc, __m256i* lo, __m256i* hi) {
  __m256i h0123 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
  __m256i h4567 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(acc[4], acc[5]), _mm256_hadd_epi32(acc[6], acc[7]));
  *lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);  // lanes 0-3 of each row
  *hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);  // lanes 4-7 of each row
}

// ------------------------------------------------------------------ decode

// Software prefetch of the codes 16 rows ahead (the hardware prefetchers leave decode at
// ~10 GB/s of codes against ~25 GB/s of read bandwidth; docs/benchmarks.md).
constexpr uint32_t kPrefetchRows = 16;

template <bool kVnni, int kBits, bool kRes, bool kLo>
void BlockDots8(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t r0,
                int32_t* dots) {
  using C = Codes256<kBits>;
  constexpr bool kComb = kRes || kLo;
  const uint32_t G = m.groups(), n = m.group();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const uint32_t tail = uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes);
  const __m256i lut = Lut<kVnni>(m.codebook().value);
  const __m256i lut_lo = Lut<kVnni>(m.codebook().lo);
  const uint8_t* rows[8];
  for (uint32_t i = 0; i < 8; ++i) rows[i] = m.row_codes(std::min(r0 + i, m.out() - 1));

  auto accumulate = [&](uint32_t c, __m256i * acc) __attribute__((always_inline)) {
    __m256i a1[C::kSub], a2[C::kSub];
    for (uint32_t s = 0; s < C::kSub; ++s) {
      a1[s] = _mm256_load_si256(reinterpret_cast<const __m256i*>(C::Act(a, t, c, s, 0)));
      if (kRes) a2[s] = _mm256_load_si256(reinterpret_cast<const __m256i*>(C::Act(a, t, c, s, 1)));
    }
    const uint32_t bytes = c + 1 == chunks ? tail : C::kChunkBytes;
#pragma GCC unroll 8
    for (uint32_t i = 0; i < 8; ++i) {
      __m256i idx[C::kSub];
      const uint8_t* src = rows[i] + uint64_t(c) * C::kChunkBytes;
      _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchRows * rb), _MM_HINT_T0);
      C::Indices(C::Load(src, bytes), idx);
      if (!kComb) {
        for (uint32_t s = 0; s < C::kSub; ++s)
          acc[i] = DotAcc<kVnni>(acc[i], _mm256_shuffle_epi8(lut, idx[s]), a1[s]);
        continue;
      }
      __m256i t1 = _mm256_setzero_si256(), t2 = _mm256_setzero_si256();
      for (uint32_t s = 0; s < C::kSub; ++s) {
        const __m256i w = _mm256_shuffle_epi8(lut, idx[s]);
        t1 = DotAcc<kVnni>(t1, w, a1[s]);
        if (kRes) t2 = DotAcc<kVnni>(t2, w, a2[s]);
        if (kLo) t2 = DotAcc<kVnni>(t2, _mm256_shuffle_epi8(lut_lo, idx[s]), a1[s]);
      }
      acc[i] = _mm256_add_epi32(acc[i], _mm256_add_epi32(_mm256_slli_epi32(t1, 7), t2));
    }
  };
  auto store = [&](uint32_t g, __m256i v) {
    v = _mm256_sub_epi32(v, _mm256_set1_epi32(OffsetCorrection8<kVnni, kRes, kLo>(a, t, g)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dots + 8 * g), v);
  };

  __m256i acc[8];
  if (n >= C::kChunkCodes) {
    const uint32_t per_group = n / C::kChunkCodes;
    for (uint32_t g = 0; g < G; ++g) {
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_si256();
      for (uint32_t c = g * per_group; c < (g + 1) * per_group; ++c) accumulate(c, acc);
      __m256i lo, hi;
      Reduce8(acc, &lo, &hi);
      store(g, _mm256_add_epi32(lo, hi));
    }
    return;
  }
  const uint32_t per_chunk = C::kChunkCodes / n, lanes = 8 / per_chunk;
  for (uint32_t c = 0; c < chunks; ++c) {
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_si256();
    accumulate(c, acc);
    const uint32_t g0 = c * per_chunk, ng = std::min(per_chunk, G - g0);
    if (per_chunk == 2) {
      __m256i lo, hi;
      Reduce8(acc, &lo, &hi);
      store(g0, lo);
      if (ng > 1) store(g0 + 1, hi);
      continue;
    }
    alignas(32) int32_t tmp[8][8];  // rare (2-bit, group 32): finish in scalar code
    for (int i = 0; i < 8; ++i) _mm256_store_si256(reinterpret_cast<__m256i*>(tmp[i]), acc[i]);
    for (uint32_t j = 0; j < ng; ++j)
      for (int i = 0; i < 8; ++i) {
        uint32_t v = 0;
        for (uint32_t l = j * lanes; l < (j + 1) * lanes; ++l) v += uint32_t(tmp[i][l]);
        dots[8 * (g0 + j) + i] =
            int32_t(v - uint32_t(OffsetCorrection8<kVnni, kRes, kLo>(a, t, g0 + j)));
      }
  }
}

using BlockDotsFn8 = void (*)(const CqKernelMatrix&, const ActivationBatch&, uint32_t, uint32_t,
                              int32_t*);
template <bool kVnni, int kBits>
BlockDotsFn8 PickBits8(bool res, bool lo) {
  if (res) return lo ? BlockDots8<kVnni, kBits, true, true> : BlockDots8<kVnni, kBits, true, false>;
  return lo ? BlockDots8<kVnni, kBits, false, true> : BlockDots8<kVnni, kBits, false, false>;
}
template <bool kVnni, int kBits>
BlockDotsFn8 PickBlockDots8(const CqKernelMatrix& m, const ActivationBatch& a) {
  return PickBits8<kVnni, kBits>(a.two_level(), m.codebook().has_lo);
}

thread_local AlignedScratch tl_norms8;

inline void Finish8(const CqKernelMatrix& m, uint32_t r0, uint32_t rows, const int32_t* dots,
                    const float* gs, float* y) {
  const uint32_t G = m.groups();
  const uint16_t* panel = BlockNorms(m, r0, 8, tl_norms8.Get<uint16_t>(size_t(G) * 16));
  __m256 acc = _mm256_setzero_ps();
  for (uint32_t g = 0; g < G; ++g) {
    __m256 nf = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + 16 * g)));
    __m256 s = _mm256_mul_ps(nf, _mm256_set1_ps(gs[g]));
    __m256 d =
        _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dots + 8 * g)));
    acc = _mm256_fmadd_ps(s, d, acc);
  }
  __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(int(rows)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(y + r0, mask, acc);
}

thread_local AlignedScratch tl_dots8, tl_gs8;

template <bool kVnni, int kBits>
void MatVec8(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
             uint32_t row_end, float* y) {
  const uint32_t G = m.groups();
  int32_t* dots = tl_dots8.Get<int32_t>(size_t(G) * 8);
  float* gs = tl_gs8.Get<float>(G);
  GroupScales(a, t, m, gs);
  auto dots_fn = PickBlockDots8<kVnni, kBits>(m, a);
  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 8) {
    dots_fn(m, a, t, r0, dots);
    Finish8(m, r0, std::min(8u, row_end - r0), dots, gs, y);
  }
}

template <bool kVnni, int kBits>
void GroupDots8(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
                uint32_t row_end, int32_t* dots) {
  const uint32_t G = m.groups();
  std::vector<int32_t> block(size_t(G) * 8);
  auto dots_fn = PickBlockDots8<kVnni, kBits>(m, a);
  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 8) {
    dots_fn(m, a, t, r0, block.data());
    for (uint32_t i = 0; i < 8 && r0 + i < row_end; ++i)
      for (uint32_t g = 0; g < G; ++g) dots[size_t(r0 + i - row_begin) * G + g] = block[8 * g + i];
  }
}

// ------------------------------------------------------------------ prefill

inline void Transpose8(const __m256i* r, __m256i* out) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

thread_local AlignedScratch tl_panel8, tl_panel8_lo, tl_tdots8;

inline __m256i Bcast4x8(const int8_t* p) {
  int32_t x4;
  std::memcpy(&x4, p, 4);
  return _mm256_set1_epi32(x4);
}

// An 8-row code panel of m: `chunks` chunks of C::kChunkBytes per row (the last `tail`),
// `vecs` vectors once expanded and transposed.
template <typename C>
struct PanelShape {
  explicit PanelShape(const CqKernelMatrix& m)
      : rb(m.row_bytes()),
        chunks(uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes)),
        tail(uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes)),
        units_per_group(m.group() / C::kUnitCodes),
        vecs(size_t(chunks) * C::kSub * 8) {}
  uint64_t rb;
  uint32_t chunks, tail, units_per_group;
  size_t vecs;
};

// The code indices of one row's chunk c (rows past the matrix repeat its last row).
template <typename C>
inline void RowChunkIndices(const CqKernelMatrix& m, const PanelShape<C>& p, uint32_t row,
                            uint32_t c, __m256i* idx) {
  const uint8_t* src = m.row_codes(std::min(row, m.out() - 1)) + uint64_t(c) * C::kChunkBytes;
  _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchRows * p.rb), _MM_HINT_T0);
  C::Indices(C::Load(src, c + 1 == p.chunks ? p.tail : C::kChunkBytes), idx);
}

template <bool kVnni, int kBits, bool kRes, bool kLo>
void MatMat8T(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
              uint32_t row_end, float* y, size_t y_stride) {
  using C = Codes256<kBits>;
  constexpr bool kComb = kRes || kLo;
  const uint32_t G = m.groups(), T = a.tokens();
  const PanelShape<C> shape(m);
  const uint32_t chunks = shape.chunks, units_per_group = shape.units_per_group;
  const size_t panel_vecs = shape.vecs;
  const __m256i lut = Lut<kVnni>(m.codebook().value);
  const __m256i lut_lo = Lut<kVnni>(m.codebook().lo);
  __m256i* panel = tl_panel8.Get<__m256i>(panel_vecs);
  __m256i* panel_lo = kLo ? tl_panel8_lo.Get<__m256i>(panel_vecs) : nullptr;
  int32_t* dots = tl_tdots8.Get<int32_t>(size_t(G) * 8);
  float* gs = tl_gs8.Get<float>(size_t(G) * T);
  for (uint32_t t = 0; t < T; ++t) GroupScales(a, t, m, gs + size_t(t) * G);

  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 8) {
    for (uint32_t c = 0; c < chunks; ++c) {
      __m256i w[C::kSub][8], wl[kLo ? C::kSub : 1][8];
      for (uint32_t i = 0; i < 8; ++i) {
        __m256i idx[C::kSub];
        RowChunkIndices(m, shape, r0 + i, c, idx);
        for (uint32_t s = 0; s < C::kSub; ++s) {
          w[s][i] = _mm256_shuffle_epi8(lut, idx[s]);
          if (kLo) wl[s][i] = _mm256_shuffle_epi8(lut_lo, idx[s]);
        }
      }
      for (uint32_t s = 0; s < C::kSub; ++s) {
        Transpose8(w[s], panel + (size_t(c) * C::kSub + s) * 8);
        if (kLo) Transpose8(wl[s], panel_lo + (size_t(c) * C::kSub + s) * 8);
      }
    }
    for (uint32_t t = 0; t < T; ++t) {
      for (uint32_t g = 0; g < G; ++g) {
        __m256i a1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        __m256i a2[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        uint32_t k = 0;
        for (uint32_t u = g * units_per_group; u < (g + 1) * units_per_group; ++u) {
          const uint32_t c = u / 8, j = u % 8;
          for (uint32_t s = 0; s < C::kSub; ++s, ++k) {
            const size_t pv = (size_t(c) * C::kSub + s) * 8 + j;
            const __m256i x1 = Bcast4x8(C::Act(a, t, c, s, 0) + 4 * j);
            a1[k & 1] = DotAcc<kVnni>(a1[k & 1], panel[pv], x1);
            if (kRes)
              a2[k & 1] =
                  DotAcc<kVnni>(a2[k & 1], panel[pv], Bcast4x8(C::Act(a, t, c, s, 1) + 4 * j));
            if (kLo) a2[k & 1] = DotAcc<kVnni>(a2[k & 1], panel_lo[pv], x1);
          }
        }
        __m256i v = _mm256_add_epi32(a1[0], a1[1]);
        if (kComb) v = _mm256_add_epi32(_mm256_slli_epi32(v, 7), _mm256_add_epi32(a2[0], a2[1]));
        v = _mm256_sub_epi32(v, _mm256_set1_epi32(OffsetCorrection8<kVnni, kRes, kLo>(a, t, g)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(dots + 8 * g), v);
      }
      Finish8(m, r0, std::min(8u, row_end - r0), dots, gs + size_t(t) * G, y + t * y_stride);
    }
  }
}

// Two-level activations without VNNI: one int16 activation per code, 128 * x1 + x2
// (|.| <= 16512), and the codes widened to int16 once per panel, so each product is one
// madd (16 multiply-adds) instead of a maddubs + madd pair per level: half the multiplies.
// Exact: sum w * (128 x1 + x2) = 128 sum w x1 + sum w x2 in int32 (a group of 512 codes
// sums at most 512 * 127 * 16512 < 2^31), which is what MatMat8T computes.
thread_local AlignedScratch tl_panel8_even, tl_panel8_odd, tl_act8_even, tl_act8_odd;

// The even bytes of v as int16 (the odd ones: _mm256_srai_epi16(v, 8)).
inline __m256i SignExtendEven(__m256i v) { return _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8); }

template <int kBits>
void MatMat8TwoLevel(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                     uint32_t row_end, float* y, size_t y_stride) {
  using C = Codes256<kBits>;
  const uint32_t G = m.groups(), T = a.tokens();
  const PanelShape<C> shape(m);
  const uint32_t chunks = shape.chunks, units_per_group = shape.units_per_group;
  const size_t panel_vecs = shape.vecs;
  const __m256i lut = Lut<false>(m.codebook().value);
  // Panel vector pv holds 4 codes (k0..k3) of each of 8 rows, a dword per row; `even` holds
  // them as int16 pairs (k0, k2), `odd` as (k1, k3), and the activations match: act_even[t][pv]
  // = the int16 pair (x[k0], x[k2]) of the combined activation, act_odd (x[k1], x[k3]).
  __m256i* even = tl_panel8_even.Get<__m256i>(panel_vecs);
  __m256i* odd = tl_panel8_odd.Get<__m256i>(panel_vecs);
  int32_t* act_even = tl_act8_even.Get<int32_t>(panel_vecs * T);
  int32_t* act_odd = tl_act8_odd.Get<int32_t>(panel_vecs * T);
  int32_t* dots = tl_tdots8.Get<int32_t>(size_t(G) * 8);
  float* gs = tl_gs8.Get<float>(size_t(G) * T);
  for (uint32_t t = 0; t < T; ++t) {
    GroupScales(a, t, m, gs + size_t(t) * G);
    for (uint32_t c = 0; c < chunks; ++c)
      for (uint32_t s = 0; s < C::kSub; ++s) {
        // 32 activations = the 8 dwords j of this (c, s); SignExtendEven's int16 m is byte
        // 2m, so dword j of the even half is (x[4j], x[4j + 2]), of the odd half (x[4j + 1],
        // x[4j + 3]).
        const __m256i x1 =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(C::Act(a, t, c, s, 0)));
        const __m256i x2 =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(C::Act(a, t, c, s, 1)));
        const size_t pv0 = size_t(t) * panel_vecs + (size_t(c) * C::kSub + s) * 8;
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(act_even + pv0),
            _mm256_add_epi16(_mm256_slli_epi16(SignExtendEven(x1), 7), SignExtendEven(x2)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(act_odd + pv0),
                            _mm256_add_epi16(_mm256_slli_epi16(_mm256_srai_epi16(x1, 8), 7),
                                             _mm256_srai_epi16(x2, 8)));
      }
  }

  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 8) {
    for (uint32_t c = 0; c < chunks; ++c) {
      __m256i w[C::kSub][8];
      for (uint32_t i = 0; i < 8; ++i) {
        __m256i idx[C::kSub];
        RowChunkIndices(m, shape, r0 + i, c, idx);
        for (uint32_t s = 0; s < C::kSub; ++s) w[s][i] = _mm256_shuffle_epi8(lut, idx[s]);
      }
      for (uint32_t s = 0; s < C::kSub; ++s) {
        __m256i p[8];
        Transpose8(w[s], p);
        for (uint32_t j = 0; j < 8; ++j) {
          const size_t pv = (size_t(c) * C::kSub + s) * 8 + j;
          even[pv] = SignExtendEven(p[j]);
          odd[pv] = _mm256_srai_epi16(p[j], 8);
        }
      }
    }
    for (uint32_t t = 0; t < T; ++t) {
      const int32_t* xe = act_even + size_t(t) * panel_vecs;
      const int32_t* xo = act_odd + size_t(t) * panel_vecs;
      for (uint32_t g = 0; g < G; ++g) {
        __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (uint32_t u = g * units_per_group; u < (g + 1) * units_per_group; ++u) {
          const uint32_t c = u / 8, j = u % 8;
          for (uint32_t s = 0; s < C::kSub; ++s) {
            const size_t pv = (size_t(c) * C::kSub + s) * 8 + j;
            acc[0] =
                _mm256_add_epi32(acc[0], _mm256_madd_epi16(even[pv], _mm256_set1_epi32(xe[pv])));
            acc[1] =
                _mm256_add_epi32(acc[1], _mm256_madd_epi16(odd[pv], _mm256_set1_epi32(xo[pv])));
          }
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(dots + 8 * g),
                           _mm256_add_epi32(acc[0], acc[1]));
      }
      Finish8(m, r0, std::min(8u, row_end - r0), dots, gs + size_t(t) * G, y + t * y_stride);
    }
  }
}

template <bool kVnni, int kBits>
void MatMat8Bits(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t rb, uint32_t re,
                 float* y, size_t ys) {
  const bool res = a.two_level(), lo = m.codebook().has_lo;
  if (!kVnni && res && !lo) return MatMat8TwoLevel<kBits>(m, a, rb, re, y, ys);
  if (res && lo) return MatMat8T<kVnni, kBits, true, true>(m, a, rb, re, y, ys);
  if (res) return MatMat8T<kVnni, kBits, true, false>(m, a, rb, re, y, ys);
  if (lo) return MatMat8T<kVnni, kBits, false, true>(m, a, rb, re, y, ys);
  MatMat8T<kVnni, kBits, false, false>(m, a, rb, re, y, ys);
}

// This ISA's products for code width kBits (its KernelTable::width entry).
template <bool kVnni, int kBits>
constexpr WidthKernels Width8() {
  return {MatVec8<kVnni, kBits>, MatMat8Bits<kVnni, kBits>, GroupDots8<kVnni, kBits>};
}

}  // namespace
}  // namespace cact::kernels::internal
