// Per-ISA entry points behind the dispatching functions of cq_kernels.h. Each ISA's
// translation unit (compiled with its own flags) defines one table.
#pragma once
#include <cstdint>

#include "engine/kernels/code_widths.h"
#include "engine/kernels/cq_kernels.h"

namespace cact::kernels::internal {

// One ISA's products for one code width.
struct WidthKernels {
  void (*matvec)(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
                 uint32_t row_end, float* y);
  void (*matmat)(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                 uint32_t row_end, float* y, size_t y_stride);
  void (*group_dots)(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                     uint32_t row_begin, uint32_t row_end, int32_t* dots);
  // They read the matrix's 16-row tiles when it has them (CqKernelMatrix::tiles).
  bool reads_tiles = false;
};

struct KernelTable {
  // Prepares token t of `out` from x (length out->in()).
  void (*prepare)(const float* x, ActivationBatch* out, uint32_t t);
  // Indexed like kCodeWidths (code_widths.h CodeWidthIndex).
  WidthKernels width[kNumCodeWidths];
  const WidthKernels& For(const CqKernelMatrix& m) const { return width[m.width_index()]; }
};

const KernelTable& ScalarTable();
const KernelTable& Avx2Table();
const KernelTable& AvxVnniTable();
const KernelTable& Avx512Table();
const KernelTable& Avx512VbmiTable();
// The AVX-512 VBMI table with the AMX-INT8 prefill product (cq_amx.cc).
const KernelTable& AmxTable();

// The AMX prefill product run on the portable tile emulator (amx_tiles.h) instead of the
// tile hardware: the same code as AmxTable().matmat except the tile primitives, for tests
// on machines without AMX. Needs AVX-512 VBMI (the code panels); not a selectable ISA.
void MatMatAmxEmulated(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                       uint32_t row_end, float* y, size_t y_stride);

// Shared portable pieces.
// Builds perm2/perm4 of one level from its natural layout (scalar; the reference layout).
void BuildPermutedLayoutsScalar(ActivationBatch* a, uint32_t t, int level);
// M of the combined dot (cq_kernels.h GroupDots): 128 with a second level, else 1.
uint32_t DotMultiplier(const ActivationBatch& a, const CqKernelMatrix& m);
// Per group g: gs[g] = scale[g] * (cb_scale / M) (the product every kernel uses).
void GroupScales(const ActivationBatch& a, uint32_t t, const CqKernelMatrix& m, float* gs);
// The FWHT's unnormalised butterflies, levels h = 1, 2, 4, ... (every kernel uses this
// order, so the floats are identical).
void FwhtButterfliesScalar(float* v, uint32_t n);
// 1 / (127 * sqrt(group)) as float, computed the same way everywhere.
float ActScaleFactor(uint32_t group);
// FP16 norms of rows r0..r0+15 as [group][16] (zero past the matrix): the panel itself when
// r0 is a multiple of 16 (or of 8 with lanes <= 8), else gathered from the blob into tmp.
const uint16_t* BlockNorms(const CqKernelMatrix& m, uint32_t r0, uint32_t lanes, uint16_t* tmp);

}  // namespace cact::kernels::internal
