// AVX-512 F/BW/VL/VNNI CQ kernels (pshufb code tables). See cq_avx512_impl.h.
#define CACT_AVX512_VBMI 0
#include "engine/kernels/cq_avx512_impl.h"

namespace cact::kernels::internal {

const KernelTable& Avx512Table() {
  static const KernelTable table = {Prepare, {Width<2>(), Width<3>(), Width<4>()}};
  return table;
}

}  // namespace cact::kernels::internal
