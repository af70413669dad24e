// AVX2 (no VNNI) CQ kernels: maddubs with the sign trick. See cq_avx2_impl.h.
#include "engine/kernels/cq_avx2_impl.h"

namespace cact::kernels::internal {

const KernelTable& Avx2Table() {
  static const KernelTable table = {PrepareAvx2,
                                    {Width8<false, 2>(), Width8<false, 3>(), Width8<false, 4>()}};
  return table;
}

}  // namespace cact::kernels::internal
