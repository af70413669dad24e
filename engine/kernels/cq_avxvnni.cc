// AVX2 + AVX-VNNI CQ kernels: 256-bit vpdpbusd with the +128 codebook offset. See
// cq_avx2_impl.h.
#include "engine/kernels/cq_avx2_impl.h"

namespace cact::kernels::internal {

const KernelTable& AvxVnniTable() {
  static const KernelTable table = {PrepareAvx2, MatVec8<true>, MatMat8<true>, GroupDots8<true>};
  return table;
}

}  // namespace cact::kernels::internal
