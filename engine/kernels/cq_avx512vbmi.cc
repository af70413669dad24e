// AVX-512 CQ kernels with VBMI: vpermb code tables, no masking of the code fields. See
// cq_avx512_impl.h.
#define CACT_AVX512_VBMI 1
#include "engine/kernels/cq_avx512_impl.h"

namespace cact::kernels::internal {

const KernelTable& Avx512VbmiTable() {
  static const KernelTable table = {Prepare, {Width<2>(), Width<3>(), Width<4>()}};
  return table;
}

}  // namespace cact::kernels::internal
