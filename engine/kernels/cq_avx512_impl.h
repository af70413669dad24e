// AVX-512 (F/BW/VL/VNNI) CQ kernels, shared by cq_avx512.cc and cq_avx512vbmi.cc (which
// defines CACT_AVX512_VBMI 1: code bytes index a 64-entry table with vpermb, so the code
// fields need no masking). Only called when CPUID says the CPU has the ISA. Everything
// lives in an anonymous namespace: the two including files have different ISA flags and
// must not share (ODR-merge) any function.
//
// Decode (MatVec): 16 rows at a time. Each row's packed codes are loaded straight from the
// blob a 64-byte chunk at a time, expanded to codebook bytes with shifts + a byte shuffle
// (the codebook offset by +128, so unsigned for vpdpbusd; the offset is removed with the
// per-group activation sums), and multiplied with the activation in the matching order
// (ActivationBatch perm2 / perm4 / natural). Per 16 rows, a tree of 32-bit adds turns the
// 16 accumulators into one vector per group whose lanes are the rows.
//
// Prefill (MatMat): the 16 rows' expanded codes are transposed once into a panel where
// each 64-byte vector holds 4 codes of each of the 16 rows; every token then needs one
// vpdpbusd per panel vector with a broadcast 4-byte activation, and no reduction. Two
// panels (32 rows) run together so each broadcast feeds two vpdpbusd.
#ifndef CACT_AVX512_VBMI
#error "define CACT_AVX512_VBMI (0 or 1) before including cq_avx512_impl.h"
#endif
// The code expansion, code panels and float finish (shared with the AMX kernel).
#include "engine/kernels/cq_avx512_codes.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/kernels/kernel_table.h"
#include "engine/kernels/scratch.h"

namespace cact::kernels::internal {
namespace {

// ------------------------------------------------------------------ activation prepare

// Butterflies h = 1, 2, 4, 8 inside one vector: x' = x * sign + swapped, which rounds
// exactly like a + b / a - b.
inline __m512 InRegisterFwht(__m512 v) {
  const __m512 s1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 s2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
  const __m512 s4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
  const __m512 s8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
  v = _mm512_fmadd_ps(v, s1, _mm512_permute_ps(v, 0xB1));
  v = _mm512_fmadd_ps(v, s2, _mm512_permute_ps(v, 0x4E));
  v = _mm512_fmadd_ps(v, s4, _mm512_shuffle_f32x4(v, v, 0xB1));
  v = _mm512_fmadd_ps(v, s8, _mm512_shuffle_f32x4(v, v, 0x4E));
  return v;
}

void BuildPerm4(const int8_t* q, uint32_t in_pad, int8_t* out) {
  const uint32_t nat = (in_pad + 63) / 64 * 64;
  const __m512i lo = _mm512_set1_epi16(0x00FF);
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (uint32_t c = 0; c * 128 < in_pad; ++c) {
    __m512i x0 = _mm512_load_si512(q + 128 * c);
    __m512i x1 = 128 * c + 64 < nat ? _mm512_load_si512(q + 128 * c + 64) : _mm512_setzero_si512();
    __m512i even = _mm512_packus_epi16(_mm512_and_si512(x0, lo), _mm512_and_si512(x1, lo));
    __m512i odd = _mm512_packus_epi16(_mm512_srli_epi16(x0, 8), _mm512_srli_epi16(x1, 8));
    _mm512_store_si512(out + 128 * c, _mm512_permutexvar_epi64(order, even));
    _mm512_store_si512(out + 128 * c + 64, _mm512_permutexvar_epi64(order, odd));
  }
}

void BuildPerm2(const int8_t* q, uint32_t in_pad, int8_t* out) {
  const uint32_t nat = (in_pad + 63) / 64 * 64;
  // Inside each 16-byte lane: byte 4d + s -> byte 4s + d.
  const __m512i tr =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m512i ia = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i ib = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  for (uint32_t c = 0; c * 256 < in_pad; ++c) {
    __m512i y[4];
    for (int i = 0; i < 4; ++i) {
      uint32_t off = 256 * c + 64 * i;
      y[i] =
          off < nat ? _mm512_shuffle_epi8(_mm512_load_si512(q + off), tr) : _mm512_setzero_si512();
    }
    __m512i p01a = _mm512_permutex2var_epi32(y[0], ia, y[1]);
    __m512i p01b = _mm512_permutex2var_epi32(y[0], ib, y[1]);
    __m512i p23a = _mm512_permutex2var_epi32(y[2], ia, y[3]);
    __m512i p23b = _mm512_permutex2var_epi32(y[2], ib, y[3]);
    int8_t* o = out + 256 * c;
    _mm512_store_si512(o + 0, _mm512_shuffle_i64x2(p01a, p23a, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm512_store_si512(o + 64, _mm512_shuffle_i64x2(p01a, p23a, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm512_store_si512(o + 128, _mm512_shuffle_i64x2(p01b, p23b, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm512_store_si512(o + 192, _mm512_shuffle_i64x2(p01b, p23b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
}

inline __m512i RoundClamp127(__m512 v) {
  __m512i r = _mm512_cvtps_epi32(v);  // nearest even (MXCSR)
  return _mm512_min_epi32(_mm512_max_epi32(r, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
}

void Prepare(const float* x, ActivationBatch* a, uint32_t t) {
  const uint32_t n = a->group(), in = a->in(), nv = n / 16;
  const bool two = a->two_level();
  int8_t* q1 = a->mutable_natural(t, 0);
  int8_t* q2 = a->mutable_natural(t, 1);
  float* scale = a->mutable_scale(t);
  const float factor = ActScaleFactor(n);
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512 fmax = _mm512_set1_ps(FLT_MAX);
  __m512 v[32];
  for (uint32_t g = 0; g < a->groups(); ++g) {
    const uint32_t base = g * n;
    for (uint32_t i = 0; i < nv; ++i) {
      uint32_t k = base + 16 * i;
      __m512 xi;
      if (k + 16 <= in) {
        xi = _mm512_loadu_ps(x + k);
      } else if (k < in) {
        xi = _mm512_maskz_loadu_ps(__mmask16((1u << (in - k)) - 1), x + k);
      } else {
        xi = _mm512_setzero_ps();
      }
      v[i] = InRegisterFwht(xi);
    }
    for (uint32_t h = 1; h < nv; h <<= 1)
      for (uint32_t i = 0; i < nv; i += 2 * h)
        for (uint32_t j = i; j < i + h; ++j) {
          __m512 p = v[j], r = v[j + h];
          v[j] = _mm512_add_ps(p, r);
          v[j + h] = _mm512_sub_ps(p, r);
        }
    __m512 m = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (uint32_t i = 0; i < nv; ++i) {
      __m512 av = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[i]), absmask));
      bad |= _mm512_cmp_ps_mask(av, fmax, _CMP_NLE_UQ);
      m = _mm512_max_ps(av, m);  // a NaN in av never wins (max returns the 2nd operand)
    }
    float amax = _mm512_reduce_max_ps(m);
    if (bad || amax == 0.f) {
      std::memset(q1 + base, 0, n);
      if (two) std::memset(q2 + base, 0, n);
      scale[g] = bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
      a->mutable_sum(t, 0)[g] = 0;
      if (two) a->mutable_sum(t, 1)[g] = 0;
      continue;
    }
    const __m512 inv = _mm512_set1_ps(127.f / amax);
    const __m512 k128 = _mm512_set1_ps(128.f);
    __m512i s1 = _mm512_setzero_si512(), s2 = _mm512_setzero_si512();
    for (uint32_t i = 0; i < nv; ++i) {
      const __m512 p = _mm512_mul_ps(v[i], inv);
      const __m512i r = RoundClamp127(p);
      s1 = _mm512_add_epi32(s1, r);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q1 + base + 16 * i), _mm512_cvtepi32_epi8(r));
      if (two) {
        const __m512i r2 =
            RoundClamp127(_mm512_mul_ps(_mm512_sub_ps(p, _mm512_cvtepi32_ps(r)), k128));
        s2 = _mm512_add_epi32(s2, r2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q2 + base + 16 * i), _mm512_cvtepi32_epi8(r2));
      }
    }
    scale[g] = amax * factor;
    a->mutable_sum(t, 0)[g] = _mm512_reduce_add_epi32(s1);
    if (two) a->mutable_sum(t, 1)[g] = _mm512_reduce_add_epi32(s2);
  }
  for (int level = 0; level < (two ? 2 : 1); ++level) {
    int8_t* q = a->mutable_natural(t, level);
    for (uint32_t k = a->in_pad(); k % 64; ++k) q[k] = 0;
    if (a->layouts() & kLayoutPerm2) BuildPerm2(q, a->in_pad(), a->mutable_perm2(t, level));
    if (a->layouts() & kLayoutPerm4) BuildPerm4(q, a->in_pad(), a->mutable_perm4(t, level));
  }
}

// ------------------------------------------------------------------ reductions

// Levels 1-2: acc[4k..4k+3] -> w[k] whose 128-bit lane L holds, for rows 4k..4k+3, the sum
// of that row's four dwords in lane L.
inline void ReduceToLanes(const __m512i* acc, __m512i* w) {
  for (int k = 0; k < 4; ++k) {
    const __m512i* a = acc + 4 * k;
    __m512i t0 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
    __m512i t1 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
    w[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
  }
}

// Two groups per accumulator (lanes 0-7 and 8-15): out[0], out[1] with lanes = rows.
inline void ReduceHalves(const __m512i* acc, __m512i* out) {
  __m512i w[4];
  ReduceToLanes(acc, w);
  __m512i x01 = _mm512_add_epi32(_mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  __m512i x23 = _mm512_add_epi32(_mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(3, 1, 3, 1)));
  out[0] = _mm512_shuffle_i32x4(x01, x23, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i32x4(x01, x23, _MM_SHUFFLE(3, 1, 3, 1));
}

// Four groups per accumulator (one per 128-bit lane).
inline void ReduceQuarters(const __m512i* acc, __m512i* out) {
  __m512i w[4];
  ReduceToLanes(acc, w);
  __m512i t0 = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(1, 0, 1, 0));
  __m512i t1 = _mm512_shuffle_i32x4(w[0], w[1], _MM_SHUFFLE(3, 2, 3, 2));
  __m512i t2 = _mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(1, 0, 1, 0));
  __m512i t3 = _mm512_shuffle_i32x4(w[2], w[3], _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
  out[2] = _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
  out[3] = _mm512_shuffle_i32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
}

inline __m512i ReduceFull(const __m512i* acc) {
  __m512i h[2];
  ReduceHalves(acc, h);
  return _mm512_add_epi32(h[0], h[1]);
}

// ------------------------------------------------------------------ decode

// Four activation bytes broadcast to every dword.
inline __m512i Bcast4(const int8_t* p) {
  int32_t x4;
  std::memcpy(&x4, p, 4);
  return _mm512_set1_epi32(x4);
}

// Exact combined group dots of 16 rows starting at r0 (rows past the end repeat the last
// row): dots[g * 16 + i] for row r0 + i.
template <int kBits, bool kRes, bool kLo>
void BlockDots(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t r0,
               int32_t* dots) {
  using C = Codes512<kBits>;
  constexpr bool kComb = kRes || kLo;
  const uint32_t G = m.groups(), n = m.group();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const uint32_t tail = uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes);
  const __m512i lut = OffsetLut(m.codebook().value, m.code_bits());
  const __m512i lut_lo = OffsetLut(m.codebook().lo, m.code_bits());
  const uint8_t* rows[16];
  for (uint32_t i = 0; i < 16; ++i) rows[i] = m.row_codes(std::min(r0 + i, m.out() - 1));

  auto accumulate = [&](uint32_t c, __m512i * acc) __attribute__((always_inline)) {
    __m512i a1[C::kSub], a2[C::kSub];
    for (uint32_t s = 0; s < C::kSub; ++s) {
      a1[s] = _mm512_load_si512(C::Act(a, t, c, s, 0));
      if (kRes) a2[s] = _mm512_load_si512(C::Act(a, t, c, s, 1));
    }
    const uint32_t bytes = c + 1 == chunks ? tail : C::kChunkBytes;
#pragma GCC unroll 16
    for (uint32_t i = 0; i < 16; ++i) {
      __m512i idx[C::kSub];
      const uint8_t* src = rows[i] + uint64_t(c) * C::kChunkBytes;
      _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchRows * rb), _MM_HINT_T0);
      C::Indices(LoadChunk(src, bytes), idx);
      if (!kComb) {
        for (uint32_t s = 0; s < C::kSub; ++s)
          acc[i] = _mm512_dpbusd_epi32(acc[i], Lookup(lut, idx[s]), a1[s]);
        continue;
      }
      __m512i t1 = _mm512_setzero_si512(), t2 = _mm512_setzero_si512();
      for (uint32_t s = 0; s < C::kSub; ++s) {
        const __m512i w = Lookup(lut, idx[s]);
        t1 = _mm512_dpbusd_epi32(t1, w, a1[s]);
        if (kRes) t2 = _mm512_dpbusd_epi32(t2, w, a2[s]);
        if (kLo) t2 = _mm512_dpbusd_epi32(t2, Lookup(lut_lo, idx[s]), a1[s]);
      }
      acc[i] = _mm512_add_epi32(acc[i], _mm512_add_epi32(_mm512_slli_epi32(t1, 7), t2));
    }
  };
  auto store = [&](uint32_t g, __m512i v) {
    v = _mm512_sub_epi32(v, _mm512_set1_epi32(OffsetCorrection<kRes, kLo>(a, t, g)));
    _mm512_storeu_si512(dots + 16 * g, v);
  };

  __m512i acc[16];
  if (n >= C::kChunkCodes) {
    const uint32_t per_group = n / C::kChunkCodes;
    for (uint32_t g = 0; g < G; ++g) {
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
      for (uint32_t c = g * per_group; c < (g + 1) * per_group; ++c) accumulate(c, acc);
      store(g, ReduceFull(acc));
    }
    return;
  }
  const uint32_t per_chunk = C::kChunkCodes / n, lanes = 16 / per_chunk;
  for (uint32_t c = 0; c < chunks; ++c) {
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
    accumulate(c, acc);
    const uint32_t g0 = c * per_chunk, ng = std::min(per_chunk, G - g0);
    __m512i out[4];
    if (per_chunk == 2) {
      ReduceHalves(acc, out);
    } else if (per_chunk == 4) {
      ReduceQuarters(acc, out);
    } else {  // rare (2-bit, group 32): finish in scalar code
      alignas(64) int32_t tmp[16][16];
      for (int i = 0; i < 16; ++i) _mm512_store_si512(tmp[i], acc[i]);
      for (uint32_t j = 0; j < ng; ++j)
        for (int i = 0; i < 16; ++i) {
          uint32_t v = 0;
          for (uint32_t l = j * lanes; l < (j + 1) * lanes; ++l) v += uint32_t(tmp[i][l]);
          dots[16 * (g0 + j) + i] =
              int32_t(v - uint32_t(OffsetCorrection<kRes, kLo>(a, t, g0 + j)));
        }
      continue;
    }
    for (uint32_t j = 0; j < ng; ++j) store(g0 + j, out[j]);
  }
}

using BlockDotsFn = void (*)(const CqKernelMatrix&, const ActivationBatch&, uint32_t, uint32_t,
                             int32_t*);
template <int kBits>
BlockDotsFn PickBlockDotsBits(bool res, bool lo) {
  if (res) return lo ? BlockDots<kBits, true, true> : BlockDots<kBits, true, false>;
  return lo ? BlockDots<kBits, false, true> : BlockDots<kBits, false, false>;
}
template <int kBits>
BlockDotsFn PickBlockDots(const CqKernelMatrix& m, const ActivationBatch& a) {
  return PickBlockDotsBits<kBits>(a.two_level(), m.codebook().has_lo);
}

// The same dots from the 16-row tiles (CqKernelMatrix::tiles) of kBlocks consecutive
// blocks from block b0: dots[(k * G + g) * 16 + i] for row 16 (b0 + k) + i. A tile vector
// holds one 4-byte unit of each of the 16 rows, so the lanes of every vpdpbusd are the
// rows: the unit's 4 activations are one broadcast dword, and nothing is reduced across
// lanes. Two blocks share each broadcast; kSub (x kBlocks) independent chains per level.
template <int kBits, bool kRes, bool kLo, int kBlocks>
void TiledDots(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t b0,
               int32_t* dots) {
  using C = Codes512<kBits>;
  constexpr bool kComb = kRes || kLo;
  const uint32_t G = m.groups(), units_per_group = m.group() / C::kUnitCodes;
  const uint64_t units = m.tile_units();
  const __m512i lut = OffsetLut(m.codebook().value, m.code_bits());
  const __m512i lut_lo = OffsetLut(m.codebook().lo, m.code_bits());
  const __m512i* tile[kBlocks];
  for (int k = 0; k < kBlocks; ++k)
    tile[k] = reinterpret_cast<const __m512i*>(m.tiles()) + (uint64_t(b0) + k) * units;
  const int8_t* act1 = C::ActBase(a, t, 0);
  const int8_t* act2 = C::ActBase(a, t, kRes ? 1 : 0);
  for (uint32_t g = 0; g < G; ++g) {
    __m512i x1[kBlocks][C::kSub], x2[kBlocks][C::kSub];
    for (int k = 0; k < kBlocks; ++k)
      for (uint32_t s = 0; s < C::kSub; ++s) x1[k][s] = x2[k][s] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (uint32_t u = g * units_per_group; u < (g + 1) * units_per_group; ++u) {
      const size_t off = size_t(u / 16) * C::kActChunk + 4 * (u % 16);
      __m512i p[kBlocks];
      for (int k = 0; k < kBlocks; ++k) {
        _mm_prefetch(reinterpret_cast<const char*>(tile[k] + u + kBlocks * units), _MM_HINT_T0);
        p[k] = _mm512_load_si512(tile[k] + u);
      }
      for (uint32_t s = 0; s < C::kSub; ++s) {
        const __m512i a1 = Bcast4(act1 + off + 64 * s);
        const __m512i a2 = kRes ? Bcast4(act2 + off + 64 * s) : a1;
        for (int k = 0; k < kBlocks; ++k) {
          const __m512i idx = C::Index(p[k], s);
          const __m512i w = Lookup(lut, idx);
          x1[k][s] = _mm512_dpbusd_epi32(x1[k][s], w, a1);
          if (kRes) x2[k][s] = _mm512_dpbusd_epi32(x2[k][s], w, a2);
          if (kLo) x2[k][s] = _mm512_dpbusd_epi32(x2[k][s], Lookup(lut_lo, idx), a1);
        }
      }
    }
    const __m512i corr = _mm512_set1_epi32(OffsetCorrection<kRes, kLo>(a, t, g));
    for (int k = 0; k < kBlocks; ++k) {
      __m512i v = x1[k][0], v2 = x2[k][0];
      for (uint32_t s = 1; s < C::kSub; ++s) {
        v = _mm512_add_epi32(v, x1[k][s]);
        v2 = _mm512_add_epi32(v2, x2[k][s]);
      }
      if (kComb) v = _mm512_add_epi32(_mm512_slli_epi32(v, 7), v2);
      _mm512_storeu_si512(dots + (size_t(k) * G + g) * 16, _mm512_sub_epi32(v, corr));
    }
  }
}

using TiledDotsFn = void (*)(const CqKernelMatrix&, const ActivationBatch&, uint32_t, uint32_t,
                             int32_t*);
template <int kBits, int kBlocks>
TiledDotsFn PickTiledDots(const CqKernelMatrix& m, const ActivationBatch& a) {
  if constexpr (kBits == 3) {
    return nullptr;  // no 3-bit tiles
  } else {
    const bool res = a.two_level(), lo = m.codebook().has_lo;
    if (res)
      return lo ? TiledDots<kBits, true, true, kBlocks> : TiledDots<kBits, true, false, kBlocks>;
    return lo ? TiledDots<kBits, false, true, kBlocks> : TiledDots<kBits, false, false, kBlocks>;
  }
}

// Whether rows from row_begin on run from the tiles (which start on whole blocks).
inline bool UseTiles(const CqKernelMatrix& m, uint32_t row_begin) {
  return m.tiles() && row_begin % 16 == 0;
}

thread_local AlignedScratch tl_dots, tl_gs;

// Calls fn(r0, rows, dots) for each 16-row block of [row_begin, row_end) with its exact
// dots [G][16], from the tiles (two blocks at a time) or from the rows.
template <int kBits, class Fn>
void ForEachBlockDots(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                      uint32_t row_begin, uint32_t row_end, Fn&& fn) {
  const uint32_t G = m.groups();
  int32_t* dots = tl_dots.Get<int32_t>(size_t(G) * 32);
  uint32_t r0 = row_begin;
  if (UseTiles(m, row_begin)) {
    const TiledDotsFn two = PickTiledDots<kBits, 2>(m, a), one = PickTiledDots<kBits, 1>(m, a);
    for (; r0 + 16 < row_end; r0 += 32) {
      two(m, a, t, r0 / 16, dots);
      fn(r0, 16u, dots);
      fn(r0 + 16, std::min(16u, row_end - r0 - 16), dots + size_t(G) * 16);
    }
    if (r0 < row_end) {
      one(m, a, t, r0 / 16, dots);
      fn(r0, row_end - r0, dots);
    }
    return;
  }
  BlockDotsFn dots_fn = PickBlockDots<kBits>(m, a);
  for (; r0 < row_end; r0 += 16) {
    dots_fn(m, a, t, r0, dots);
    fn(r0, std::min(16u, row_end - r0), dots);
  }
}

template <int kBits>
void MatVec(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
            uint32_t row_end, float* y) {
  float* gs = tl_gs.Get<float>(m.groups());
  GroupScales(a, t, m, gs);
  ForEachBlockDots<kBits>(
      m, a, t, row_begin, row_end,
      [&](uint32_t r0, uint32_t rows, const int32_t* dots) { Finish(m, r0, rows, dots, gs, y); });
}

template <int kBits>
void GroupDotsAvx512(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                     uint32_t row_begin, uint32_t row_end, int32_t* dots) {
  const uint32_t G = m.groups();
  ForEachBlockDots<kBits>(m, a, t, row_begin, row_end,
                          [&](uint32_t r0, uint32_t rows, const int32_t* block) {
                            for (uint32_t i = 0; i < rows; ++i)
                              for (uint32_t g = 0; g < G; ++g)
                                dots[size_t(r0 + i - row_begin) * G + g] = block[16 * g + i];
                          });
}

// ------------------------------------------------------------------ prefill

thread_local AlignedScratch tl_panel, tl_panel_lo, tl_tdots;

// kPanels 16-row panels (1 or 2) against every token of the batch, kTokens tokens at a
// time: each panel vector is loaded once per token block, and each broadcast activation
// feeds kPanels vpdpbusd (broadcasts, not multiplies, limit the one-panel loop: measured
// here, 4.6 G vpdpbusd/s with one broadcast each, 5.4 G with one per two, 6.4 G without).
// The accumulators are independent chains (vpdpbusd has a 5-cycle latency). Missing tokens
// of the last block repeat its first token; their results are dropped.
template <int kBits, bool kRes, bool kLo, int kPanels>
void PanelTokens(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t r0, uint32_t row_end,
                 const __m512i* const* panels, const __m512i* const* panels_lo, const float* gs,
                 int32_t* dots, float* y, size_t y_stride) {
  using C = Codes512<kBits>;
  constexpr bool kComb = kRes || kLo;
  constexpr uint32_t kTokens = kPanels == 2 ? (kComb ? 4 : 6) : (kComb ? 6 : 8);
  const uint32_t G = m.groups(), n = m.group(), T = a.tokens();
  const uint32_t units_per_group = n / C::kUnitCodes;
  for (uint32_t t0 = 0; t0 < T; t0 += kTokens) {
    const uint32_t nt = std::min(kTokens, T - t0);
    const int8_t* act1[kTokens];
    const int8_t* act2[kTokens];
    for (uint32_t j = 0; j < kTokens; ++j) {
      const uint32_t t = t0 + (j < nt ? j : 0);
      act1[j] = C::ActBase(a, t, 0);
      act2[j] = C::ActBase(a, t, kRes ? 1 : 0);
    }
    for (uint32_t g = 0; g < G; ++g) {
      __m512i a1[kPanels][kTokens], a2[kPanels][kTokens];
      for (int p = 0; p < kPanels; ++p)
        for (uint32_t j = 0; j < kTokens; ++j) a1[p][j] = a2[p][j] = _mm512_setzero_si512();
      for (uint32_t u = g * units_per_group; u < (g + 1) * units_per_group; ++u) {
        const uint32_t c = u / 16, jj = u % 16;
        for (uint32_t s = 0; s < C::kSub; ++s) {
          const size_t pv = (size_t(c) * C::kSub + s) * 16 + jj;
          const size_t off = size_t(c) * C::kActChunk + 64 * s + 4 * jj;
          __m512i w[kPanels], wl[kPanels];
          for (int p = 0; p < kPanels; ++p) {
            w[p] = panels[p][pv];
            wl[p] = kLo ? panels_lo[p][pv] : w[p];
          }
#pragma GCC unroll 8
          for (uint32_t j = 0; j < kTokens; ++j) {
            const __m512i x1 = Bcast4(act1[j] + off);
            const __m512i x2 = kRes ? Bcast4(act2[j] + off) : x1;
            for (int p = 0; p < kPanels; ++p) {
              a1[p][j] = _mm512_dpbusd_epi32(a1[p][j], w[p], x1);
              if (kRes) a2[p][j] = _mm512_dpbusd_epi32(a2[p][j], w[p], x2);
              if (kLo) a2[p][j] = _mm512_dpbusd_epi32(a2[p][j], wl[p], x1);
            }
          }
        }
      }
      for (int p = 0; p < kPanels; ++p)
        for (uint32_t j = 0; j < nt; ++j) {
          __m512i v = a1[p][j];
          if (kComb) v = _mm512_add_epi32(_mm512_slli_epi32(v, 7), a2[p][j]);
          v = _mm512_sub_epi32(v, _mm512_set1_epi32(OffsetCorrection<kRes, kLo>(a, t0 + j, g)));
          _mm512_store_si512(dots + ((size_t(p) * kTokens + j) * G + g) * 16, v);
        }
    }
    for (int p = 0; p < kPanels; ++p) {
      const uint32_t rp = r0 + 16 * p;
      for (uint32_t j = 0; j < nt; ++j)
        Finish(m, rp, std::min(16u, row_end - rp), dots + (size_t(p) * kTokens + j) * G * 16,
               gs + size_t(t0 + j) * G, y + (t0 + j) * y_stride);
    }
  }
}

template <int kBits, bool kRes, bool kLo>
void MatMatT(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
             uint32_t row_end, float* y, size_t y_stride) {
  using C = Codes512<kBits>;
  const uint32_t G = m.groups(), T = a.tokens();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const __m512i lut = OffsetLut(m.codebook().value, m.code_bits());
  const __m512i lut_lo = OffsetLut(m.codebook().lo, m.code_bits());
  const size_t panel_vecs = size_t(chunks) * C::kSub * 16;
  __m512i* panel = tl_panel.Get<__m512i>(2 * panel_vecs);
  __m512i* panel_lo = kLo ? tl_panel_lo.Get<__m512i>(2 * panel_vecs) : nullptr;
  const __m512i* panels[2] = {panel, panel + panel_vecs};
  const __m512i* panels_lo[2] = {panel_lo, kLo ? panel_lo + panel_vecs : nullptr};
  int32_t* dots = tl_tdots.Get<int32_t>(size_t(G) * 16 * 16);
  float* gs = tl_gs.Get<float>(size_t(G) * T);
  for (uint32_t t = 0; t < T; ++t) GroupScales(a, t, m, gs + size_t(t) * G);

  uint32_t r0 = row_begin;
  for (; r0 + 16 < row_end; r0 += 32) {  // two panels: 32 rows (the second may be partial)
    BuildPanel<kBits, kLo>(m, r0, lut, lut_lo, panel, panel_lo);
    BuildPanel<kBits, kLo>(m, r0 + 16, lut, lut_lo, panel + panel_vecs,
                           kLo ? panel_lo + panel_vecs : nullptr);
    PanelTokens<kBits, kRes, kLo, 2>(m, a, r0, row_end, panels, panels_lo, gs, dots, y, y_stride);
  }
  if (r0 < row_end) {
    BuildPanel<kBits, kLo>(m, r0, lut, lut_lo, panel, panel_lo);
    PanelTokens<kBits, kRes, kLo, 1>(m, a, r0, row_end, panels, panels_lo, gs, dots, y, y_stride);
  }
}

template <int kBits>
void MatMatBits(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t rb, uint32_t re,
                float* y, size_t ys) {
  const bool res = a.two_level(), lo = m.codebook().has_lo;
  if (res && lo) return MatMatT<kBits, true, true>(m, a, rb, re, y, ys);
  if (res) return MatMatT<kBits, true, false>(m, a, rb, re, y, ys);
  if (lo) return MatMatT<kBits, false, true>(m, a, rb, re, y, ys);
  MatMatT<kBits, false, false>(m, a, rb, re, y, ys);
}

// This ISA's products for code width kBits (its KernelTable::width entry).
template <int kBits>
constexpr WidthKernels Width() {
  return {MatVec<kBits>, MatMatBits<kBits>, GroupDotsAvx512<kBits>, kBits != 3};
}

}  // namespace
}  // namespace cact::kernels::internal
