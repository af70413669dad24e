// The AMX-INT8 kernel table: the AVX-512 VBMI kernels with the tile prefill product of
// cq_amx_impl.h on the tile hardware. Built with the AVX-512 VBMI and AMX-TILE/INT8 flags
// (cmake/cact_isa.cmake); only called when IsaSupported(Isa::kAmx).
#define CACT_AVX512_VBMI 1
#include "engine/kernels/cq_amx_impl.h"

namespace cact::kernels::internal {
namespace {

// GCC's tile intrinsics are macros that paste the tile number into the instruction text
// (#dst), so they take literal numbers only: with GCC each primitive expands one
// `if constexpr` per tile number (per combination for tdpbssd). clang's are builtins that
// take constant expressions (and reject tdpbssd on equal tiles even in a discarded
// branch), so they get the template arguments directly.
//
// Their asm statements also do not tell the compiler all the memory they read: tileloadd
// names no memory operand at all and ldtilecfg only the first 8 bytes of the 64-byte
// configuration, so a compiler barrier first makes sure the code panels and the
// configuration are in memory (tilestored has a "memory" clobber).
inline void CompilerBarrier() { __asm__ volatile("" ::: "memory"); }

// clang-format off
struct HardwareTiles {
  void Configure(const TileConfig& c) {
    CompilerBarrier();
    _tile_loadconfig(&c);
  }
  template <int kT>
  void Load(const void* base, size_t stride) {
    static_assert(kT >= 0 && kT < kTiles);
    CompilerBarrier();
#if defined(__clang__)
    _tile_loadd(kT, base, stride);
#else
#define CACT_TILE_LOAD(n) if constexpr (kT == n) _tile_loadd(n, base, stride);
    CACT_TILE_LOAD(0) CACT_TILE_LOAD(1) CACT_TILE_LOAD(2) CACT_TILE_LOAD(3)
    CACT_TILE_LOAD(4) CACT_TILE_LOAD(5) CACT_TILE_LOAD(6) CACT_TILE_LOAD(7)
#undef CACT_TILE_LOAD
#endif
  }
  template <int kT>
  void Zero() {
    static_assert(kT >= 0 && kT < kTiles);
#if defined(__clang__)
    _tile_zero(kT);
#else
#define CACT_TILE_ZERO(n) if constexpr (kT == n) _tile_zero(n);
    CACT_TILE_ZERO(0) CACT_TILE_ZERO(1) CACT_TILE_ZERO(2) CACT_TILE_ZERO(3)
    CACT_TILE_ZERO(4) CACT_TILE_ZERO(5) CACT_TILE_ZERO(6) CACT_TILE_ZERO(7)
#undef CACT_TILE_ZERO
#endif
  }
  template <int kC, int kA, int kB>
  void Dot() {
    static_assert(kC >= 0 && kC < kTiles && kA >= 0 && kA < kTiles && kB >= 0 && kB < kTiles);
    static_assert(kC != kA && kC != kB && kA != kB, "tdpbssd needs three distinct tiles");
#if defined(__clang__)
    _tile_dpbssd(kC, kA, kB);
#else
#define CACT_TILE_DP(c, a, b) if constexpr (kC == c && kA == a && kB == b) _tile_dpbssd(c, a, b);
#define CACT_TILE_DP_B(c, a)                                                              \
    CACT_TILE_DP(c, a, 0) CACT_TILE_DP(c, a, 1) CACT_TILE_DP(c, a, 2) CACT_TILE_DP(c, a, 3) \
    CACT_TILE_DP(c, a, 4) CACT_TILE_DP(c, a, 5) CACT_TILE_DP(c, a, 6) CACT_TILE_DP(c, a, 7)
#define CACT_TILE_DP_A(c)                                                             \
    CACT_TILE_DP_B(c, 0) CACT_TILE_DP_B(c, 1) CACT_TILE_DP_B(c, 2) CACT_TILE_DP_B(c, 3) \
    CACT_TILE_DP_B(c, 4) CACT_TILE_DP_B(c, 5) CACT_TILE_DP_B(c, 6) CACT_TILE_DP_B(c, 7)
    CACT_TILE_DP_A(0) CACT_TILE_DP_A(1) CACT_TILE_DP_A(2) CACT_TILE_DP_A(3)
    CACT_TILE_DP_A(4) CACT_TILE_DP_A(5) CACT_TILE_DP_A(6) CACT_TILE_DP_A(7)
#undef CACT_TILE_DP_A
#undef CACT_TILE_DP_B
#undef CACT_TILE_DP
#endif
  }
  template <int kT>
  void Store(void* base, size_t stride) {
    static_assert(kT >= 0 && kT < kTiles);
#if defined(__clang__)
    _tile_stored(kT, base, stride);
#else
#define CACT_TILE_STORE(n) if constexpr (kT == n) _tile_stored(n, base, stride);
    CACT_TILE_STORE(0) CACT_TILE_STORE(1) CACT_TILE_STORE(2) CACT_TILE_STORE(3)
    CACT_TILE_STORE(4) CACT_TILE_STORE(5) CACT_TILE_STORE(6) CACT_TILE_STORE(7)
#undef CACT_TILE_STORE
#endif
  }
  void Release() { _tile_release(); }
};
// clang-format on

}  // namespace

const KernelTable& AmxTable() {
  static const KernelTable table = [] {
    KernelTable t = Avx512VbmiTable();
    for (size_t w = 0; w < kNumCodeWidths; ++w) t.width[w].matmat = kAmxMatMat<HardwareTiles>[w];
    return t;
  }();
  return table;
}

}  // namespace cact::kernels::internal
