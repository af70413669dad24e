// The portable AMX tile emulator (amx_tiles.h). Baseline ISA: no intrinsics.
#include "engine/kernels/amx_tiles.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cact::kernels::internal {
namespace {

[[noreturn]] void Refuse(const char* op, int tile, const char* why) {
  std::fprintf(stderr, "cact AMX tile emulator: %s (tile %d): %s\n", op, tile, why);
  std::abort();
}

bool ValidTile(int t) { return t >= 0 && t < kTiles; }

}  // namespace

const char* TileConfigError(const TileConfig& c) {
  if (c.palette_id != 1) return "palette_id is not 1";
  if (c.start_row != 0) return "start_row is not 0";
  for (uint8_t r : c.reserved)
    if (r) return "reserved bytes are not zero";
  for (int t = 0; t < 16; ++t) {
    const uint32_t rows = c.rows[t], colsb = c.colsb[t];
    if (t >= kTiles) {
      if (rows || colsb) return "a tile past palette 1's eight is configured";
      continue;
    }
    if ((rows == 0) != (colsb == 0)) return "a tile has rows without columns or the reverse";
    if (rows > kTileRows) return "more than 16 rows";
    if (colsb > kTileColsb) return "more than 64 bytes per row";
    if (colsb % 4) return "bytes per row not a multiple of 4";
  }
  return nullptr;
}

TileEmulator::TileEmulator() = default;

void TileEmulator::LoadConfig(const TileConfig& c) {
  if (const char* why = TileConfigError(c)) Refuse("ldtilecfg", -1, why);
  for (int t = 0; t < kTiles; ++t) {
    rows_[t] = c.rows[t];
    colsb_[t] = c.colsb[t];
  }
  std::memset(data_, 0, sizeof data_);
  configured_ = true;
}

void TileEmulator::Configured(int tile, const char* op) const {
  if (!ValidTile(tile)) Refuse(op, tile, "no such tile");
  if (!configured_) Refuse(op, tile, "tiles not configured");
  if (rows_[tile] == 0) Refuse(op, tile, "tile not configured (0 rows)");
}

void TileEmulator::Load(int tile, const void* base, size_t stride) {
  Configured(tile, "tileloadd");
  std::memset(data_[tile], 0, sizeof data_[tile]);
  const uint8_t* p = static_cast<const uint8_t*>(base);
  for (int r = 0; r < rows_[tile]; ++r) std::memcpy(data_[tile][r], p + r * stride, colsb_[tile]);
}

void TileEmulator::Zero(int tile) {
  Configured(tile, "tilezero");
  std::memset(data_[tile], 0, sizeof data_[tile]);
}

void TileEmulator::Store(int tile, void* base, size_t stride) const {
  Configured(tile, "tilestored");
  uint8_t* p = static_cast<uint8_t*>(base);
  for (int r = 0; r < rows_[tile]; ++r) std::memcpy(p + r * stride, data_[tile][r], colsb_[tile]);
}

void TileEmulator::DotBssd(int c, int a, int b) {
  Configured(c, "tdpbssd");
  Configured(a, "tdpbssd");
  Configured(b, "tdpbssd");
  if (c == a || c == b || a == b) Refuse("tdpbssd", c, "operands are not three distinct tiles");
  const int M = rows_[c], N = colsb_[c] / 4, K = colsb_[a] / 4;
  if (rows_[a] != M) Refuse("tdpbssd", a, "A rows != C rows");
  if (colsb_[b] != colsb_[c]) Refuse("tdpbssd", b, "B bytes per row != C bytes per row");
  if (rows_[b] != K) Refuse("tdpbssd", b, "B rows != A bytes per row / 4");
  // C[m][n] += sum_k sum_i A[m][4k+i] * B[k][4n+i], mod 2^32 (each product fits int32).
  for (int m = 0; m < M; ++m) {
    uint32_t acc[kTileColsb / 4];
    std::memcpy(acc, data_[c][m], sizeof acc);
    for (int k = 0; k < K; ++k)
      for (int i = 0; i < 4; ++i) {
        const int32_t x = int8_t(data_[a][m][4 * k + i]);
        for (int n = 0; n < N; ++n) acc[n] += uint32_t(x * int32_t(int8_t(data_[b][k][4 * n + i])));
      }
    std::memcpy(data_[c][m], acc, sizeof acc);
  }
}

void TileEmulator::Release() {
  configured_ = false;
  std::memset(rows_, 0, sizeof rows_);
  std::memset(colsb_, 0, sizeof colsb_);
  std::memset(data_, 0, sizeof data_);
}

}  // namespace cact::kernels::internal
