// Lloyd-Max scalar codebooks for CQ (spec section 1, "Codebook generation"), bit-exact
// with the exporter: 400,000 legacy-gauss samples from RandomState(0), sorted, quantile
// initial centres, 200 Lloyd iterations in float64 with numpy-pairwise means.
#pragma once
#include <cstdint>
#include <vector>

namespace cact {

// Unit-variance Lloyd-Max levels in float64 for bits 2, 3 or 4 (cached after first use).
const std::vector<double>& UnitLloydMax(uint32_t bits);
// float32(levels / sqrt(group)). bits 2/3/4, or 5 (ternary): float32({-1.2240064,0,1.2240064}/sqrt(g)).
std::vector<float> CqCodebook(uint32_t bits, uint32_t group);
// The 28-value header codebook: CQ2 | CQ3 | CQ4 at `group`.
std::vector<float> HeaderCodebook(uint32_t group = 128);
// Infers the group the header codebook was scaled for (0 when no power of two matches).
uint32_t InferCodebookGroup(const float* cq2_values);

}  // namespace cact
