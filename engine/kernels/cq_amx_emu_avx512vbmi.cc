// The AMX prefill product of cq_amx_impl.h on the portable tile emulator (amx_tiles.h):
// internal::MatMatAmxEmulated, for tests on machines without AMX. Built with the AVX-512
// VBMI flags (the code panels); needs no AMX.
#define CACT_AVX512_VBMI 1
#include "engine/kernels/cq_amx_impl.h"

namespace cact::kernels::internal {
namespace {

struct EmulatedTiles {
  TileEmulator emu;
  void Configure(const TileConfig& c) { emu.LoadConfig(c); }
  template <int kT>
  void Load(const void* base, size_t stride) {
    emu.Load(kT, base, stride);
  }
  template <int kT>
  void Zero() {
    emu.Zero(kT);
  }
  template <int kC, int kA, int kB>
  void Dot() {
    emu.DotBssd(kC, kA, kB);
  }
  template <int kT>
  void Store(void* base, size_t stride) {
    emu.Store(kT, base, stride);
  }
  void Release() { emu.Release(); }
};

}  // namespace

void MatMatAmxEmulated(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                       uint32_t row_end, float* y, size_t y_stride) {
  if (row_begin >= row_end || a.tokens() == 0) return;
  kAmxMatMat<EmulatedTiles>[m.width_index()](m, a, row_begin, row_end, y, y_stride);
}

}  // namespace cact::kernels::internal
