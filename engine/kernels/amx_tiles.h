// AMX tile configuration and a portable emulator of the tile instructions the AMX prefill
// kernel uses (ldtilecfg, tileloadd, tilezero, tdpbssd, tilestored, tilerelease), so the
// kernel's whole logic runs and is tested on machines without AMX (cq_amx_impl.h).
//
// Semantics (Intel SDM, palette 1: 8 tiles of up to 16 rows x 64 bytes):
//  - a tile t holds rows[t] rows of colsb[t] bytes; a load reads rows[t] rows of colsb[t]
//    bytes at base + r * stride (stride in bytes) and zeroes the rest of the 16 x 64 bytes;
//    a store writes rows[t] x colsb[t] bytes; loading a configuration zeroes every tile.
//  - tdpbssd C, A, B (signed x signed int8): with M = rows[C], N = colsb[C] / 4,
//    K = colsb[A] / 4, and B in the VNNI layout (K rows of N dwords, 4 k-values each),
//      C[m][n] += sum_{k<K} sum_{i<4} int32(A[m][4k+i]) * int32(B[k][4n+i])  (mod 2^32);
//    it requires rows[A] == M, colsb[B] == colsb[C], rows[B] == K and distinct tiles.
// The emulator refuses (prints what is wrong and aborts) what the hardware refuses with
// #GP/#UD: invalid configurations, unconfigured tiles, incompatible tdpbssd shapes. It is
// stricter in one respect: it requires colsb to be a multiple of 4 (the int8 products work
// on dwords; the kernel never needs anything else).
//
// Everything with code is out of line in amx_tiles.cc (built for the baseline ISA), so
// translation units with different ISA flags share no inline function (ODR).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cact::kernels::internal {

inline constexpr int kTiles = 8, kTileRows = 16, kTileColsb = 64;

// The 64-byte memory operand of ldtilecfg. A plain aggregate (no member initialisers, so
// no inline constructor): value-initialise it, TileConfig c{}.
struct alignas(64) TileConfig {
  uint8_t palette_id;  // 1 (palette 0 means "release the tiles")
  uint8_t start_row;   // 0 (only nonzero to restart an interrupted load/store)
  uint8_t reserved[14];
  uint16_t colsb[16];  // bytes per row of tile t (t >= 8: 0)
  uint8_t rows[16];    // rows of tile t (t >= 8: 0)
};
static_assert(sizeof(TileConfig) == 64);
static_assert(offsetof(TileConfig, colsb) == 16 && offsetof(TileConfig, rows) == 48);

// nullptr when ldtilecfg would accept `c` (with the emulator's colsb % 4 rule), else why not.
const char* TileConfigError(const TileConfig& c);

class TileEmulator {
 public:
  TileEmulator();
  void LoadConfig(const TileConfig& c);                   // ldtilecfg
  void Load(int tile, const void* base, size_t stride);   // tileloadd
  void Zero(int tile);                                    // tilezero
  void Store(int tile, void* base, size_t stride) const;  // tilestored
  void DotBssd(int c, int a, int b);                      // tdpbssd c, a, b
  void Release();                                         // tilerelease

 private:
  void Configured(int tile, const char* op) const;
  bool configured_ = false;
  uint8_t rows_[kTiles] = {};
  uint16_t colsb_[kTiles] = {};
  alignas(64) uint8_t data_[kTiles][kTileRows][kTileColsb] = {};
};

}  // namespace cact::kernels::internal
