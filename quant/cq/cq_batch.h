// CQ kernels (internal to quant/): groups are processed 16 at a time, transposed so that
// every step of the spec's per-group computation is a loop over 16 independent lanes. Each
// lane performs exactly the scalar operation sequence (same rounding), so the results do
// not depend on the batching or on the instruction set the kernel was compiled for
// (AVX-512 / AVX2 / baseline clones, no FMA contraction).
//
// A matrix is a list of out*groups() groups in row-major order: group q is row q/groups(),
// group q%groups(); its codes sit at q*group in the unpacked code array, its norm at q.
#pragma once
#include <cstdint>
#include <span>

#include "quant/cq/cq.h"

namespace cact::cq_internal {

// Codes and FP16 norms of groups [q_begin, q_end) of the row-major [out, in] matrix `w`;
// adds those groups' squared reconstruction error and squared norm to *error_sq/*signal_sq.
void QuantizeGroups(const float* w, const CqShape& s, std::span<const float> codebook,
                    CqRotation rotation, uint64_t q_begin, uint64_t q_end, uint8_t* codes,
                    uint16_t* norms, double* error_sq, double* signal_sq);

// Dequantizes groups [q_begin, q_end) of a blob; `out` holds rows from `out_row0` on
// ([rows, in] row-major), padding columns are dropped.
void DequantizeGroups(std::span<const uint8_t> blob, const CqShape& s,
                      std::span<const float> codebook, CqRotation rotation, uint64_t q_begin,
                      uint64_t q_end, float* out, uint64_t out_row0);

}  // namespace cact::cq_internal
