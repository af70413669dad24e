// AVX2 (no VNNI) CQ kernels: maddubs with the sign trick. See cq_avx2_impl.h.
#include "engine/kernels/cq_avx2_impl.h"

namespace cact::kernels::internal {

const KernelTable& Avx2Table() {
  static const KernelTable table = {PrepareAvx2, MatVec8<false>, MatMat8<false>, GroupDots8<false>};
  return table;
}

}  // namespace cact::kernels::internal
