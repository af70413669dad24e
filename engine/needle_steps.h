// Steps of the Needle block that the reference and the fast forward share: one body each,
// so both run the same float operations in the same order. Where the two keep their rows
// differently (dense FP32 copies and a full history in the reference; encoded file rows, a
// chunk buffer and a history ring in the fast path) a callback hands out the row.
#pragma once
#include <cstdint>
#include <span>

#include "absl/functional/function_ref.h"
#include "formats/needle/geometry.h"

namespace cact::steps {

// mean[c] = (sum_j X[j][c]) / lanes over the lanes of X [lanes][d], lane 0 first.
void LaneMean(const float* X, uint32_t lanes, uint32_t d, float* mean);

// Copies table row `row` (table * engram_slots + slot) of an engram site into out[sub_dim].
using EngramRowReader = absl::FunctionRef<void(uint32_t row, float* out)>;

// The num_engram_tables table rows of one engram site for position pos of `tokens`, into
// rows [T][sub_dim]: table t reads slot EngramSlot(block, t, ...) of its n-gram; a table
// whose n-gram reaches before position 0 (pos + 1 < order) gives a zero row.
void GatherEngramRows(const Geometry& g, std::span<const int32_t> tokens, uint32_t pos,
                      EngramRowReader read_row, float* rows);

// The raw engram value [d] of an earlier (or the current) position.
using EngramValueAt = absl::FunctionRef<const float*(uint32_t position)>;

// Causal depthwise convolution of one site at position pos:
// out[c] = sum_j taps[j][c] * v[pos - j * dilation][c] over the engram_conv_taps taps that
// reach no further back than position 0, tap 0 first.
void EngramConv(const Geometry& g, const float* taps, uint32_t pos, EngramValueAt value_at,
                float* out);

}  // namespace cact::steps
