// The AMX-INT8 prefill product (MatMatRows), generic over a Tiles policy: cq_amx.cc
// instantiates it with the tile instructions, cq_amx_emu_avx512vbmi.cc with the portable
// emulator (amx_tiles.h). Everything but the six tile primitives is this code:
//   Configure(const TileConfig&)  ldtilecfg          Load<t>(base, stride)  tileloadd
//   Zero<t>()                     tilezero           Dot<c, a, b>()         tdpbssd
//   Store<t>(base, stride)        tilestored         Release()              tilerelease
// (tile numbers are template arguments: the instructions encode them).
//
// Codes: the VBMI prefill's 16-row code panels (cq_avx512_codes.h BuildPanel) with the
// signed codebook bytes (and the residual's) instead of the +128 offset ones. Panel vector
// (c * kSub + s) * 16 + j holds, for the 16 rows, the 4 code values that multiply bytes
// 4j..4j+3 of activation run s of chunk c: consecutive vectors are exactly the rows of a
// B tile (VNNI layout, N = 16 matrix rows, 4 k-values per dword). An A tile is up to 16
// tokens' bytes of the same run (row stride = the batch's token stride), so one tdpbssd
// adds, for 16 tokens x 16 rows, the products of K = 4 * (B rows) activation values.
//
// Groups: a group covers units_per_group dwords j of each run (2-bit: 16 codes per unit,
// 4-bit: 8), so K is 4 * min(16, units_per_group) bytes (2-bit group 128: 32; a whole run
// of 64 when the group spans a chunk or more), fixed for the call. Per group and token
// block the accumulators start at zero: tiles 0/1 = hi . q1 of panel 0/1, tiles 2/3 = the
// second term of panel 0/1 (hi . q2 when two-level, plus lo . q1 with a codebook residual);
// tile 4 = q1 activations, 5 = q2, 6/7 = the code panels (hi, then lo: reloaded). Then
// D = M * C1 + C2 (mod 2^32, exact: cq_kernels.h GroupDots) and the documented float
// finish (Finish), so the outputs are bit-identical to every other kernel.
//
// Handled: 2-bit (and ternary) and 4-bit codes, any group, any rows (partial panels repeat
// the last row; their outputs are dropped), any tokens (the last block configures fewer A/C
// rows). 3-bit codes (natural order, 24-byte chunks) go to the VBMI kernel.
//
// The includer defines CACT_AVX512_VBMI 1. Anonymous namespace: see cq_avx512_codes.h.
#pragma once
#include "engine/kernels/amx_tiles.h"
#include "engine/kernels/cq_avx512_codes.h"

namespace cact::kernels::internal {
namespace {

// Tile numbers (see the top of the file).
constexpr int kAccMain = 0;   // + panel: hi . q1
constexpr int kAccResid = 2;  // + panel: hi . q2 + lo . q1
constexpr int kActQ1 = 4, kActQ2 = 5;
constexpr int kCodes = 6;  // + panel

// C tiles: `tokens` rows of 16 int32; A tiles: `tokens` rows of kbytes (K = kbytes / 4
// dwords); B tiles: kbytes / 4 rows of 64 bytes.
inline TileConfig AmxTileConfig(uint32_t tokens, uint32_t kbytes) {
  TileConfig c{};
  c.palette_id = 1;
  for (int t = 0; t < kTiles; ++t) {
    const bool acc = t < kActQ1, act = t == kActQ1 || t == kActQ2;
    c.rows[t] = uint8_t(act || acc ? tokens : kbytes / 4);
    c.colsb[t] = uint16_t(act ? kbytes : 64);
  }
  return c;
}

thread_local AlignedScratch tl_amx_panel, tl_amx_panel_lo, tl_amx_dots, tl_amx_gs;

// One K step of panel p: codes (and their residual) against the loaded activation tiles.
template <class Tiles, bool kRes, bool kLo, int p>
inline void AmxStep(Tiles& tiles, const __m512i* panel, const __m512i* panel_lo, size_t pv) {
  tiles.template Load<kCodes + p>(panel + pv, 64);
  tiles.template Dot<kAccMain + p, kActQ1, kCodes + p>();
  if constexpr (kRes) tiles.template Dot<kAccResid + p, kActQ2, kCodes + p>();
  if constexpr (kLo) {
    tiles.template Load<kCodes + p>(panel_lo + pv, 64);
    tiles.template Dot<kAccResid + p, kActQ1, kCodes + p>();
  }
}

// kPanels 16-row panels (1 or 2) at r0 against every token, 16 tokens at a time.
// `configured`: the A/C rows the tiles are configured for (0: not yet).
template <class Tiles, int kBits, bool kRes, bool kLo, int kPanels>
void AmxPanelTokens(Tiles& tiles, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t r0,
                    uint32_t row_end, const __m512i* const* panels, const __m512i* const* panels_lo,
                    const float* gs, int32_t* dots, float* y, size_t y_stride,
                    uint32_t* configured) {
  using C = Codes512<kBits>;
  constexpr bool kComb = kRes || kLo;
  const uint32_t G = m.groups(), T = a.tokens();
  const uint32_t units_per_group = m.group() / C::kUnitCodes;
  const uint32_t kdwords = std::min(16u, units_per_group), kbytes = 4 * kdwords;
  const uint32_t steps = units_per_group / kdwords;  // K steps per group and run
  const size_t stride = a.token_stride();
  alignas(64) int32_t c1[kPanels][16][16], c2[kPanels][16][16];
  for (uint32_t t0 = 0; t0 < T; t0 += 16) {
    const uint32_t nt = std::min(16u, T - t0);
    if (nt != *configured) {
      tiles.Configure(AmxTileConfig(nt, kbytes));
      *configured = nt;
    }
    const int8_t* act1 = C::ActBase(a, t0, 0);
    const int8_t* act2 = C::ActBase(a, t0, kRes ? 1 : 0);
    for (uint32_t g = 0; g < G; ++g) {
      tiles.template Zero<kAccMain>();
      if constexpr (kPanels == 2) tiles.template Zero<kAccMain + 1>();
      if constexpr (kComb) {
        tiles.template Zero<kAccResid>();
        if constexpr (kPanels == 2) tiles.template Zero<kAccResid + 1>();
      }
      for (uint32_t q = 0; q < steps; ++q) {
        const uint32_t u = g * units_per_group + q * kdwords, c = u / 16, j0 = u % 16;
        for (uint32_t s = 0; s < C::kSub; ++s) {
          const size_t pv = (size_t(c) * C::kSub + s) * 16 + j0;
          const size_t off = size_t(c) * C::kActChunk + 64 * s + 4 * j0;
          tiles.template Load<kActQ1>(act1 + off, stride);
          if constexpr (kRes) tiles.template Load<kActQ2>(act2 + off, stride);
          AmxStep<Tiles, kRes, kLo, 0>(tiles, panels[0], panels_lo[0], pv);
          if constexpr (kPanels == 2)
            AmxStep<Tiles, kRes, kLo, 1>(tiles, panels[1], panels_lo[1], pv);
        }
      }
      tiles.template Store<kAccMain>(c1[0], 64);
      if constexpr (kPanels == 2) tiles.template Store<kAccMain + 1>(c1[kPanels - 1], 64);
      if constexpr (kComb) {
        tiles.template Store<kAccResid>(c2[0], 64);
        if constexpr (kPanels == 2) tiles.template Store<kAccResid + 1>(c2[kPanels - 1], 64);
      }
      for (int p = 0; p < kPanels; ++p)
        for (uint32_t j = 0; j < nt; ++j) {
          int32_t* d = dots + ((size_t(p) * 16 + j) * G + g) * 16;
          for (int i = 0; i < 16; ++i)
            d[i] =
                kComb ? int32_t(uint32_t(c1[p][j][i]) * 128u + uint32_t(c2[p][j][i])) : c1[p][j][i];
        }
    }
    for (int p = 0; p < kPanels; ++p) {
      const uint32_t rp = r0 + 16 * p;
      for (uint32_t j = 0; j < nt; ++j)
        Finish(m, rp, std::min(16u, row_end - rp), dots + (size_t(p) * 16 + j) * G * 16,
               gs + size_t(t0 + j) * G, y + (t0 + j) * y_stride);
    }
  }
}

template <class Tiles, int kBits, bool kRes, bool kLo>
void AmxMatMatT(Tiles& tiles, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                uint32_t row_end, float* y, size_t y_stride) {
  using C = Codes512<kBits>;
  const uint32_t G = m.groups(), T = a.tokens();
  const uint64_t rb = m.row_bytes();
  const uint32_t chunks = uint32_t((rb + C::kChunkBytes - 1) / C::kChunkBytes);
  const __m512i lut = SignedLut(m.codebook().value, m.code_bits());
  const __m512i lut_lo = SignedLut(m.codebook().lo, m.code_bits());
  const size_t panel_vecs = size_t(chunks) * C::kSub * 16;
  __m512i* panel = tl_amx_panel.Get<__m512i>(2 * panel_vecs);
  __m512i* panel_lo = kLo ? tl_amx_panel_lo.Get<__m512i>(2 * panel_vecs) : nullptr;
  const __m512i* panels[2] = {panel, panel + panel_vecs};
  const __m512i* panels_lo[2] = {panel_lo, kLo ? panel_lo + panel_vecs : nullptr};
  int32_t* dots = tl_amx_dots.Get<int32_t>(size_t(2) * 16 * G * 16);
  float* gs = tl_amx_gs.Get<float>(size_t(G) * T);
  for (uint32_t t = 0; t < T; ++t) GroupScales(a, t, m, gs + size_t(t) * G);

  // ldtilecfg state is per thread and the callers are a persistent team's threads: every
  // call configures (on its first token block) and releases the tiles.
  uint32_t configured = 0;
  uint32_t r0 = row_begin;
  for (; r0 + 16 < row_end; r0 += 32) {  // two panels: 32 rows (the second may be partial)
    BuildPanel<kBits, kLo>(m, r0, lut, lut_lo, panel, panel_lo);
    BuildPanel<kBits, kLo>(m, r0 + 16, lut, lut_lo, panel + panel_vecs,
                           kLo ? panel_lo + panel_vecs : nullptr);
    AmxPanelTokens<Tiles, kBits, kRes, kLo, 2>(tiles, m, a, r0, row_end, panels, panels_lo, gs,
                                               dots, y, y_stride, &configured);
  }
  if (r0 < row_end) {
    BuildPanel<kBits, kLo>(m, r0, lut, lut_lo, panel, panel_lo);
    AmxPanelTokens<Tiles, kBits, kRes, kLo, 1>(tiles, m, a, r0, row_end, panels, panels_lo, gs,
                                               dots, y, y_stride, &configured);
  }
  if (configured) tiles.Release();
}

template <class Tiles, int kBits>
void AmxMatMatBits(Tiles& tiles, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t rb,
                   uint32_t re, float* y, size_t ys) {
  const bool res = a.two_level(), lo = m.codebook().has_lo;
  if (res && lo) return AmxMatMatT<Tiles, kBits, true, true>(tiles, m, a, rb, re, y, ys);
  if (res) return AmxMatMatT<Tiles, kBits, true, false>(tiles, m, a, rb, re, y, ys);
  if (lo) return AmxMatMatT<Tiles, kBits, false, true>(tiles, m, a, rb, re, y, ys);
  AmxMatMatT<Tiles, kBits, false, false>(tiles, m, a, rb, re, y, ys);
}

// MatMatRows of code width kBits with a fresh Tiles; 3-bit codes go to the VBMI kernel.
template <class Tiles, int kBits>
void AmxMatMat(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
               uint32_t row_end, float* y, size_t y_stride) {
  if constexpr (kBits == 3) {
    Avx512VbmiTable().For(m).matmat(m, a, row_begin, row_end, y, y_stride);
  } else {
    Tiles tiles;
    AmxMatMatBits<Tiles, kBits>(tiles, m, a, row_begin, row_end, y, y_stride);
  }
}

// The AMX prefill product per code width, indexed like kCodeWidths.
template <class Tiles>
constexpr decltype(WidthKernels::matmat) kAmxMatMat[kNumCodeWidths] = {
    AmxMatMat<Tiles, 2>, AmxMatMat<Tiles, 3>, AmxMatMat<Tiles, 4>};

}  // namespace
}  // namespace cact::kernels::internal
