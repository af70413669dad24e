#include "engine/needle_steps.h"

#include <algorithm>

#include "engine/ops.h"

namespace cact::steps {

void LaneMean(const float* X, uint32_t lanes, uint32_t d, float* mean) {
  std::fill(mean, mean + d, 0.f);
  for (uint32_t j = 0; j < lanes; ++j)
    for (uint32_t c = 0; c < d; ++c) mean[c] += X[size_t(j) * d + c];
  for (uint32_t c = 0; c < d; ++c) mean[c] /= float(lanes);
}

void GatherEngramRows(const Geometry& g, std::span<const int32_t> tokens, uint32_t pos,
                      EngramRowReader read_row, float* rows) {
  const uint32_t T = g.num_engram_tables, S = g.engram_slots, sub = g.engram_sub_dim,
                 hpo = g.heads_per_order();
  for (uint32_t table = 0; table < T; ++table) {
    const uint32_t order = g.engram_orders[table / hpo];
    float* row = rows + size_t(table) * sub;
    if (pos + 1 < order) {
      std::fill(row, row + sub, 0.f);
      continue;
    }
    const uint32_t slot = ops::EngramSlot(g.block(), table, order, tokens, pos, S);
    read_row(table * S + slot, row);
  }
}

void EngramConv(const Geometry& g, const float* taps, uint32_t pos, EngramValueAt value_at,
                float* out) {
  const uint32_t d = g.d_model, dil = g.engram_conv_dilation;
  std::fill(out, out + d, 0.f);
  for (uint32_t j = 0; j < g.engram_conv_taps; ++j) {
    if (uint64_t(j) * dil > pos) break;
    const float* vj = value_at(pos - j * dil);
    const float* tj = taps + size_t(j) * d;
    for (uint32_t c = 0; c < d; ++c) out[c] += tj[c] * vj[c];
  }
}

}  // namespace cact::steps
