// AVX2 + AVX-VNNI CQ kernels: 256-bit vpdpbusd with the +128 codebook offset. See
// cq_avx2_impl.h.
#include "engine/kernels/cq_avx2_impl.h"

namespace cact::kernels::internal {

const KernelTable& AvxVnniTable() {
  static const KernelTable table = {PrepareAvx2,
                                    {Width8<true, 2>(), Width8<true, 3>(), Width8<true, 4>()}};
  return table;
}

}  // namespace cact::kernels::internal
