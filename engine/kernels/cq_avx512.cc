// AVX-512 (F/BW/VL/VNNI) CQ kernels. Compiled with AVX-512 flags; only called when CPUID
// says the CPU has them.
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
// vpdpbusd per panel vector with a broadcast 4-byte activation, and no reduction.
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on _mm512_undefined_*() inside the
// intrinsics themselves (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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

void BuildPerm4(const ActivationBatch& a, uint32_t t, int8_t* out) {
  const int8_t* q = a.natural(t);
  const uint32_t nat = (a.in_pad() + 63) / 64 * 64;
  const __m512i lo = _mm512_set1_epi16(0x00FF);
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (uint32_t c = 0; c * 128 < a.in_pad(); ++c) {
    __m512i x0 = _mm512_load_si512(q + 128 * c);
    __m512i x1 = 128 * c + 64 < nat ? _mm512_load_si512(q + 128 * c + 64) : _mm512_setzero_si512();
    __m512i even = _mm512_packus_epi16(_mm512_and_si512(x0, lo), _mm512_and_si512(x1, lo));
    __m512i odd = _mm512_packus_epi16(_mm512_srli_epi16(x0, 8), _mm512_srli_epi16(x1, 8));
    _mm512_store_si512(out + 128 * c, _mm512_permutexvar_epi64(order, even));
    _mm512_store_si512(out + 128 * c + 64, _mm512_permutexvar_epi64(order, odd));
  }
}

void BuildPerm2(const ActivationBatch& a, uint32_t t, int8_t* out) {
  const int8_t* q = a.natural(t);
  const uint32_t nat = (a.in_pad() + 63) / 64 * 64;
  // Inside each 16-byte lane: byte 4d + s -> byte 4s + d.
  const __m512i tr = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m512i ia = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i ib = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  for (uint32_t c = 0; c * 256 < a.in_pad(); ++c) {
    __m512i y[4];
    for (int i = 0; i < 4; ++i) {
      uint32_t off = 256 * c + 64 * i;
      y[i] = off < nat ? _mm512_shuffle_epi8(_mm512_load_si512(q + off), tr) : _mm512_setzero_si512();
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

void Prepare(const float* x, ActivationBatch* a, uint32_t t) {
  const uint32_t n = a->group(), in = a->in(), nv = n / 16;
  int8_t* q = a->mutable_natural(t);
  float* scale = a->mutable_scale(t);
  int32_t* sum = a->mutable_sum(t);
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
      std::memset(q + base, 0, n);
      scale[g] = bad ? std::numeric_limits<float>::quiet_NaN() : 0.f;
      sum[g] = 0;
      continue;
    }
    const __m512 inv = _mm512_set1_ps(127.f / amax);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    __m512i s = _mm512_setzero_si512();
    for (uint32_t i = 0; i < nv; ++i) {
      __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(v[i], inv));  // nearest even (MXCSR)
      r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
      s = _mm512_add_epi32(s, r);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + base + 16 * i), _mm512_cvtepi32_epi8(r));
    }
    scale[g] = amax * factor;
    sum[g] = _mm512_reduce_add_epi32(s);
  }
  for (uint32_t k = a->in_pad(); k % 64; ++k) q[k] = 0;
  BuildPerm2(*a, t, a->mutable_perm2(t));
  BuildPerm4(*a, t, a->mutable_perm4(t));
}

// ------------------------------------------------------------------ code expansion

// Expands one chunk of packed codes P into kSub vectors of unsigned codebook bytes w[s];
// byte j of w[s] multiplies byte j of the activation run s of the chunk.
template <int kCodeBits>
struct Codes512;

template <>
struct Codes512<2> {  // also ternary crumbs
  static constexpr uint32_t kChunkCodes = 256, kChunkBytes = 64, kSub = 4, kUnitCodes = 16;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s) {
    return a.perm2(t) + 256 * c + 64 * s;
  }
  static inline void Expand(__m512i p, __m512i lut, __m512i* w) {
    const __m512i m3 = _mm512_set1_epi8(3);
    w[0] = _mm512_shuffle_epi8(lut, _mm512_and_si512(p, m3));
    w[1] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 2), m3));
    w[2] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 4), m3));
    w[3] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 6), m3));
  }
};

template <>
struct Codes512<4> {
  static constexpr uint32_t kChunkCodes = 128, kChunkBytes = 64, kSub = 2, kUnitCodes = 8;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s) {
    return a.perm4(t) + 128 * c + 64 * s;
  }
  static inline void Expand(__m512i p, __m512i lut, __m512i* w) {
    const __m512i m15 = _mm512_set1_epi8(15);
    w[0] = _mm512_shuffle_epi8(lut, _mm512_and_si512(p, m15));
    w[1] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(p, 4), m15));
  }
};

template <>
struct Codes512<3> {  // 24 packed bytes -> 64 codes in natural order
  static constexpr uint32_t kChunkCodes = 64, kChunkBytes = 24, kSub = 1, kUnitCodes = 4;
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t) {
    return a.natural(t) + 64 * c;
  }
  static inline void Expand(__m512i p, __m512i lut, __m512i* w) {
    // 16-byte lane L gets packed bytes 6L..6L+5 (codes 16L..16L+15); they start at byte
    // 0, 2, 0, 2 of the lane after this dword permutation.
    const __m512i dw = _mm512_setr_epi32(0, 1, 2, 0, 1, 2, 3, 0, 3, 4, 5, 0, 4, 5, 6, 0);
    const __m512i lane_off = _mm512_setr_epi32(0, 0, 0, 0, 0x02020202, 0x02020202, 0x02020202,
                                               0x02020202, 0, 0, 0, 0, 0x02020202, 0x02020202,
                                               0x02020202, 0x02020202);
    // Word i (code i, bit 3i) = bytes floor(3i/8) and the next; the second 8 codes are 3
    // bytes further. Each word is then shifted right by 3i mod 8.
    const __m512i ca = _mm512_add_epi8(
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3)),
        lane_off);
    const __m512i cb = _mm512_add_epi8(ca, _mm512_set1_epi8(3));
    const __m512i sh = _mm512_broadcast_i32x4(_mm_setr_epi16(0, 3, 6, 1, 4, 7, 2, 5));
    const __m512i m7 = _mm512_set1_epi16(7);
    __m512i v = _mm512_permutexvar_epi32(dw, p);
    __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(v, ca), sh), m7);
    __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(v, cb), sh), m7);
    w[0] = _mm512_shuffle_epi8(lut, _mm512_packus_epi16(lo, hi));
  }
};

inline __m512i LoadChunk(const uint8_t* p, uint32_t bytes) {
  if (bytes == 64) return _mm512_loadu_si512(p);
  return _mm512_maskz_loadu_epi8((~0ull) >> (64 - bytes), p);
}

inline __m512i OffsetLut(const Int8Codebook& cb) {
  alignas(16) uint8_t lut[16];
  for (int k = 0; k < 16; ++k) lut[k] = uint8_t(int(cb.value[k]) + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(lut)));
}

// ------------------------------------------------------------------ reductions

// Levels 1-2: acc[4k..4k+3] -> w[k] whose 128-bit lane L holds, for rows 4k..4k+3, the sum
// of that row's four dwords in lane L.
inline void ReduceToLanes(const __m512i* acc, __m512i* w) {
  for (int k = 0; k < 4; ++k) {
    const __m512i* a = acc + 4 * k;
    __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
    __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
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

// Exact group dots of 16 rows starting at r0 (rows past the end repeat the last row):
// dots[g * 16 + i] for row r0 + i.
template <int kBits>
void BlockDots(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t r0,
               int32_t* dots) {
  using C = Codes512<kBits>;
  const uint32_t G = m.groups(), n = m.group();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const uint32_t tail = uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes);
  const __m512i lut = OffsetLut(m.codebook());
  const int32_t* xsum = a.sum(t);
  const uint8_t* rows[16];
  for (uint32_t i = 0; i < 16; ++i) rows[i] = m.codes() + std::min(r0 + i, m.out() - 1) * rb;

  auto accumulate = [&](uint32_t c, __m512i* acc) {
    __m512i act[C::kSub];
    for (uint32_t s = 0; s < C::kSub; ++s) act[s] = _mm512_load_si512(C::Act(a, t, c, s));
    const uint32_t bytes = c + 1 == chunks ? tail : C::kChunkBytes;
#pragma GCC unroll 16
    for (uint32_t i = 0; i < 16; ++i) {
      __m512i w[C::kSub];
      C::Expand(LoadChunk(rows[i] + uint64_t(c) * C::kChunkBytes, bytes), lut, w);
      for (uint32_t s = 0; s < C::kSub; ++s) acc[i] = _mm512_dpbusd_epi32(acc[i], w[s], act[s]);
    }
  };
  auto store = [&](uint32_t g, __m512i v) {
    v = _mm512_sub_epi32(v, _mm512_set1_epi32(128 * xsum[g]));
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
          int32_t v = 0;
          for (uint32_t l = j * lanes; l < (j + 1) * lanes; ++l) v += tmp[i][l];
          dots[16 * (g0 + j) + i] = v - 128 * xsum[g0 + j];
        }
      continue;
    }
    for (uint32_t j = 0; j < ng; ++j) store(g0 + j, out[j]);
  }
}

using BlockDotsFn = void (*)(const CqKernelMatrix&, const ActivationBatch&, uint32_t, uint32_t,
                             int32_t*);
BlockDotsFn PickBlockDots(const CqKernelMatrix& m) {
  switch (m.code_bits()) {
    case 2: return BlockDots<2>;
    case 3: return BlockDots<3>;
    default: return BlockDots<4>;
  }
}

thread_local AlignedScratch tl_norms;

// y[r0 .. r0+rows) from exact dots [G][16]: the documented float accumulation.
inline void Finish(const CqKernelMatrix& m, uint32_t r0, uint32_t rows, const int32_t* dots,
                   const float* gs, float* y) {
  const uint32_t G = m.groups();
  const uint16_t* panel = BlockNorms(m, r0, 16, tl_norms.Get<uint16_t>(size_t(G) * 16));
  __m512 acc = _mm512_setzero_ps();
  for (uint32_t g = 0; g < G; ++g) {
    __m512 nf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 16 * g)));
    __m512 s = _mm512_mul_ps(nf, _mm512_set1_ps(gs[g]));
    __m512 d = _mm512_cvtepi32_ps(_mm512_loadu_si512(dots + 16 * g));
    acc = _mm512_fmadd_ps(s, d, acc);
  }
  _mm512_mask_storeu_ps(y + r0, __mmask16((1u << rows) - 1), acc);
}

thread_local std::vector<int32_t> tl_dots;
thread_local std::vector<float> tl_gs;

void MatVec(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
            uint32_t row_end, float* y) {
  const uint32_t G = m.groups();
  tl_dots.resize(size_t(G) * 16);
  tl_gs.resize(G);
  GroupScales(a, t, m.codebook().scale, tl_gs.data());
  BlockDotsFn dots_fn = PickBlockDots(m);
  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 16) {
    dots_fn(m, a, t, r0, tl_dots.data());
    Finish(m, r0, std::min(16u, row_end - r0), tl_dots.data(), tl_gs.data(), y);
  }
}

void GroupDotsAvx512(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                     uint32_t row_begin, uint32_t row_end, int32_t* dots) {
  const uint32_t G = m.groups();
  std::vector<int32_t> block(size_t(G) * 16);
  BlockDotsFn dots_fn = PickBlockDots(m);
  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 16) {
    dots_fn(m, a, t, r0, block.data());
    for (uint32_t i = 0; i < 16 && r0 + i < row_end; ++i)
      for (uint32_t g = 0; g < G; ++g) dots[size_t(r0 + i - row_begin) * G + g] = block[16 * g + i];
  }
}

// ------------------------------------------------------------------ prefill

// 16x16 transpose of 32-bit elements: out[j] lane i = in[i] lane j.
inline void Transpose16(const __m512i* in, __m512i* out) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    __m512i b = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    __m512i c = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    out[j] = _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0));
    out[4 + j] = _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1));
    out[8 + j] = _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(2, 0, 2, 0));
    out[12 + j] = _mm512_shuffle_i32x4(b, d, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

thread_local AlignedScratch tl_panel;

template <int kBits>
void MatMatT(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
             uint32_t row_end, float* y, size_t y_stride) {
  using C = Codes512<kBits>;
  const uint32_t G = m.groups(), n = m.group(), T = a.tokens();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const uint32_t tail = uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes);
  const uint32_t units_per_group = n / C::kUnitCodes;
  const __m512i lut = OffsetLut(m.codebook());
  __m512i* panel = tl_panel.Get<__m512i>(size_t(chunks) * C::kSub * 16);
  tl_dots.resize(size_t(G) * 16);
  tl_gs.resize(size_t(G) * T);
  for (uint32_t t = 0; t < T; ++t) GroupScales(a, t, m.codebook().scale, tl_gs.data() + size_t(t) * G);

  for (uint32_t r0 = row_begin; r0 < row_end; r0 += 16) {
    // Panel: vector (c * kSub + s) * 16 + j holds dword j of w[s] of chunk c for the 16 rows.
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t bytes = c + 1 == chunks ? tail : C::kChunkBytes;
      __m512i w[C::kSub][16];
      for (uint32_t i = 0; i < 16; ++i) {
        const uint8_t* row = m.codes() + std::min(r0 + i, m.out() - 1) * rb;
        __m512i e[C::kSub];
        C::Expand(LoadChunk(row + uint64_t(c) * C::kChunkBytes, bytes), lut, e);
        for (uint32_t s = 0; s < C::kSub; ++s) w[s][i] = e[s];
      }
      for (uint32_t s = 0; s < C::kSub; ++s) Transpose16(w[s], panel + (size_t(c) * C::kSub + s) * 16);
    }
    for (uint32_t t = 0; t < T; ++t) {
      const int32_t* xsum = a.sum(t);
      for (uint32_t g = 0; g < G; ++g) {
        __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                          _mm512_setzero_si512()};
        uint32_t k = 0;
        for (uint32_t u = g * units_per_group; u < (g + 1) * units_per_group; ++u) {
          const uint32_t c = u / 16, j = u % 16;
          for (uint32_t s = 0; s < C::kSub; ++s, ++k) {
            int32_t x4;
            std::memcpy(&x4, C::Act(a, t, c, s) + 4 * j, 4);
            acc[k & 3] = _mm512_dpbusd_epi32(acc[k & 3], panel[(size_t(c) * C::kSub + s) * 16 + j],
                                             _mm512_set1_epi32(x4));
          }
        }
        __m512i v = _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
        v = _mm512_sub_epi32(v, _mm512_set1_epi32(128 * xsum[g]));
        _mm512_storeu_si512(tl_dots.data() + 16 * g, v);
      }
      Finish(m, r0, std::min(16u, row_end - r0), tl_dots.data(), tl_gs.data() + size_t(t) * G,
             y + t * y_stride);
    }
  }
}

void MatMat(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
            uint32_t row_end, float* y, size_t y_stride) {
  switch (m.code_bits()) {
    case 2: return MatMatT<2>(m, a, row_begin, row_end, y, y_stride);
    case 3: return MatMatT<3>(m, a, row_begin, row_end, y, y_stride);
    default: return MatMatT<4>(m, a, row_begin, row_end, y, y_stride);
  }
}

}  // namespace

const KernelTable& Avx512Table() {
  static const KernelTable table = {Prepare, MatVec, MatMat, GroupDotsAvx512};
  return table;
}

}  // namespace cact::kernels::internal
