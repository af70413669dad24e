// The AVX-512 code expansion shared by the VNNI kernels (cq_avx512_impl.h) and the AMX
// prefill kernel (cq_amx_impl.h): packed codes -> codebook bytes (Codes512, the byte
// tables, Lookup), the 16-row code panels of the prefill kernels (BuildPanel) and the
// documented float finish (Finish). Like cq_avx512_impl.h it lives in an anonymous
// namespace: the including files have different ISA flags and must not share (ODR-merge)
// any function. The includer defines CACT_AVX512_VBMI (0 or 1).
#pragma once
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on _mm512_undefined_*() inside the
// intrinsics themselves (a known false positive).
#if !defined(__clang__)  // clang has no such warning, and warns about the pragma
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

#ifndef CACT_AVX512_VBMI
#error "define CACT_AVX512_VBMI (0 or 1) before including cq_avx512_codes.h"
#endif

namespace cact::kernels::internal {
namespace {

constexpr bool kVbmi = CACT_AVX512_VBMI;

// ------------------------------------------------------------------ code expansion

// Splits one chunk of packed codes P into kSub vectors of code indices idx[s]; byte j of
// idx[s] multiplies byte j of the chunk's activation run s (level l at Act(a, t, c, s, l)).
template <int kCodeBits>
struct Codes512;

template <>
struct Codes512<2> {  // also ternary crumbs
  static constexpr uint32_t kChunkCodes = 256, kChunkBytes = 64, kSub = 4, kUnitCodes = 16;
  static constexpr uint32_t kActChunk = 256;  // activation bytes per chunk
  static const int8_t* ActBase(const ActivationBatch& a, uint32_t t, int l) {
    return a.perm2(t, l);
  }
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s, int l) {
    return a.perm2(t, l) + 256 * c + 64 * s;
  }
  // idx[s] alone (vpermb ignores bits 6-7: its table repeats every 4 entries, so the
  // fields need no mask).
  static inline __m512i Index(__m512i p, uint32_t s) {
    const __m512i v = s ? _mm512_srli_epi16(p, int(2 * s)) : p;
    return kVbmi ? v : _mm512_and_si512(v, _mm512_set1_epi8(3));
  }
  static inline void Indices(__m512i p, __m512i* idx) {
    for (uint32_t s = 0; s < kSub; ++s) idx[s] = Index(p, s);
  }
};

template <>
struct Codes512<4> {
  static constexpr uint32_t kChunkCodes = 128, kChunkBytes = 64, kSub = 2, kUnitCodes = 8;
  static constexpr uint32_t kActChunk = 128;
  static const int8_t* ActBase(const ActivationBatch& a, uint32_t t, int l) {
    return a.perm4(t, l);
  }
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t s, int l) {
    return a.perm4(t, l) + 128 * c + 64 * s;
  }
  // idx[s] alone (vpermb: the table repeats every 16 entries, no mask).
  static inline __m512i Index(__m512i p, uint32_t s) {
    const __m512i v = s ? _mm512_srli_epi16(p, 4) : p;
    return kVbmi ? v : _mm512_and_si512(v, _mm512_set1_epi8(15));
  }
  static inline void Indices(__m512i p, __m512i* idx) {
    for (uint32_t s = 0; s < kSub; ++s) idx[s] = Index(p, s);
  }
};

template <>
struct Codes512<3> {  // 24 packed bytes -> 64 codes in natural order
  static constexpr uint32_t kChunkCodes = 64, kChunkBytes = 24, kSub = 1, kUnitCodes = 4;
  static constexpr uint32_t kActChunk = 64;
  static const int8_t* ActBase(const ActivationBatch& a, uint32_t t, int l) {
    return a.natural(t, l);
  }
  static const int8_t* Act(const ActivationBatch& a, uint32_t t, uint32_t c, uint32_t, int l) {
    return a.natural(t, l) + 64 * c;
  }
  static inline void Indices(__m512i p, __m512i* idx) {
    // 16-byte lane L gets packed bytes 6L..6L+5 (codes 16L..16L+15); they start at byte
    // 0, 2, 0, 2 of the lane after this dword permutation.
    const __m512i dw = _mm512_setr_epi32(0, 1, 2, 0, 1, 2, 3, 0, 3, 4, 5, 0, 4, 5, 6, 0);
    const __m512i lane_off =
        _mm512_setr_epi32(0, 0, 0, 0, 0x02020202, 0x02020202, 0x02020202, 0x02020202, 0, 0, 0, 0,
                          0x02020202, 0x02020202, 0x02020202, 0x02020202);
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
    idx[0] = _mm512_packus_epi16(lo, hi);
  }
};

inline __m512i LoadChunk(const uint8_t* p, uint32_t bytes) {
  if (bytes == 64) return _mm512_loadu_si512(p);
  return _mm512_maskz_loadu_epi8((~0ull) >> (64 - bytes), p);
}

// Byte table of the codebook (or its residual) as signed int8 (the AMX kernel's tdpbssd
// multiplies signed bytes). pshufb form: 16 entries in every 128-bit lane; vpermb form: 64
// entries, entry k holding code k mod 2^code_bits (so unmasked code fields index it).
inline __m512i SignedLut(const int8_t* values, uint32_t code_bits) {
  // Built with two vector ops: it runs once per 16-row block (a scalar loop here was ~10 %
  // of the decode kernel's time).
  const __m512i v =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  if (!kVbmi || code_bits == 4) return v;  // entry k = values[k mod 16] already
  const __m512i lane_iota =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __m512i mask = _mm512_set1_epi8(char((1u << code_bits) - 1));
  return _mm512_shuffle_epi8(v, _mm512_and_si512(lane_iota, mask));
}

// The same table offset by +128: unsigned for vpdpbusd.
inline __m512i OffsetLut(const int8_t* values, uint32_t code_bits) {
  return _mm512_xor_si512(SignedLut(values, code_bits), _mm512_set1_epi8(char(0x80)));
}

inline __m512i Lookup(__m512i lut, __m512i idx) {
  if constexpr (kVbmi)
    return _mm512_permutexvar_epi8(idx, lut);
  else
    return _mm512_shuffle_epi8(lut, idx);
}

// What the +128 offsets added to the combined dot of group g (subtracted at the end):
// M * 128 * S1 + [two-level] 128 * S2 + [residual codebook] 128 * S1, modulo 2^32.
template <bool kRes, bool kLo>
inline int32_t OffsetCorrection(const ActivationBatch& a, uint32_t t, uint32_t g) {
  const uint32_t M = kRes || kLo ? 128 : 1;
  uint32_t s1 = uint32_t(a.sum(t, 0)[g]);
  uint32_t c = M * 128u * s1;
  if (kRes) c += 128u * uint32_t(a.sum(t, 1)[g]);
  if (kLo) c += 128u * s1;
  return int32_t(c);
}

// Software prefetch of the next 16-row block's codes: without it decode read the codes at
// ~10 GB/s against ~25 GB/s of read bandwidth (docs/benchmarks.md).
constexpr uint32_t kPrefetchRows = 16;

thread_local AlignedScratch tl_norms;

// y[r0 .. r0+rows) from exact dots [G][16]: the documented float accumulation.
inline void Finish(const CqKernelMatrix& m, uint32_t r0, uint32_t rows, const int32_t* dots,
                   const float* gs, float* y) {
  const uint32_t G = m.groups();
  const uint16_t* panel = BlockNorms(m, r0, 16, tl_norms.Get<uint16_t>(size_t(G) * 16));
  __m512 acc = _mm512_setzero_ps();
  for (uint32_t g = 0; g < G; ++g) {
    __m512 nf =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + 16 * g)));
    __m512 s = _mm512_mul_ps(nf, _mm512_set1_ps(gs[g]));
    __m512 d = _mm512_cvtepi32_ps(_mm512_loadu_si512(dots + 16 * g));
    acc = _mm512_fmadd_ps(s, d, acc);
  }
  _mm512_mask_storeu_ps(y + r0, __mmask16((1u << rows) - 1), acc);
}

// ------------------------------------------------------------------ code panels

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

// Builds the panel of the 16 rows starting at r0: vector (c * kSub + s) * 16 + j holds
// dword j of chunk c, run s, for the 16 rows (rows past the end repeat the last row, or
// are zero when read from the tiles; either way their results are dropped).
template <int kBits, bool kLo>
void BuildPanel(const CqKernelMatrix& m, uint32_t r0, __m512i lut, __m512i lut_lo, __m512i* panel,
                __m512i* panel_lo) {
  using C = Codes512<kBits>;
  const uint64_t rb = m.row_bytes();
  if constexpr (kBits != 3) {
    if (m.tiles() && r0 % 16 == 0) {  // tile vector c * 16 + j is dword j of chunk c already
      const uint64_t units = m.tile_units();
      const __m512i* tile = reinterpret_cast<const __m512i*>(m.tiles()) + r0 / 16 * units;
      for (uint64_t u = 0; u < units; ++u) {
        _mm_prefetch(reinterpret_cast<const char*>(tile + u + units), _MM_HINT_T0);
        __m512i idx[C::kSub];
        C::Indices(_mm512_load_si512(tile + u), idx);
        const size_t v = (u / 16 * C::kSub) * 16 + u % 16;
        for (uint32_t s = 0; s < C::kSub; ++s) {
          panel[v + 16 * s] = Lookup(lut, idx[s]);
          if (kLo) panel_lo[v + 16 * s] = Lookup(lut_lo, idx[s]);
        }
      }
      return;
    }
  }
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const uint32_t tail = uint32_t(rb - uint64_t(chunks - 1) * C::kChunkBytes);
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint32_t bytes = c + 1 == chunks ? tail : C::kChunkBytes;
    __m512i w[C::kSub][16], wl[kLo ? C::kSub : 1][16];
    for (uint32_t i = 0; i < 16; ++i) {
      const uint8_t* row = m.row_codes(std::min(r0 + i, m.out() - 1));
      __m512i idx[C::kSub];
      const uint8_t* src = row + uint64_t(c) * C::kChunkBytes;
      _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchRows * rb), _MM_HINT_T0);
      C::Indices(LoadChunk(src, bytes), idx);
      for (uint32_t s = 0; s < C::kSub; ++s) {
        w[s][i] = Lookup(lut, idx[s]);
        if (kLo) wl[s][i] = Lookup(lut_lo, idx[s]);
      }
    }
    for (uint32_t s = 0; s < C::kSub; ++s) {
      Transpose16(w[s], panel + (size_t(c) * C::kSub + s) * 16);
      if (kLo) Transpose16(wl[s], panel_lo + (size_t(c) * C::kSub + s) * 16);
    }
  }
}

}  // namespace
}  // namespace cact::kernels::internal
