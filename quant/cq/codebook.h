// Lloyd-Max scalar codebooks for CQ (spec section 1, "Codebook generation"), bit-exact
// with the exporter: 400,000 legacy-gauss samples from RandomState(0), sorted, quantile
// initial centres, 200 Lloyd iterations in float64 with numpy-pairwise means.
#pragma once
#include <cstdint>
#include <vector>

#include "formats/cact/header.h"  // CqType table, kTernaryLevel, InferCodebookGroup

namespace cact {

// Unit-variance Lloyd-Max levels in float64 for bits 2, 3 or 4 (cached after first use).
const std::vector<double>& UnitLloydMax(uint32_t bits);
// The unit levels of a width in float64: UnitLloydMax for bits 2/3/4, {-l, 0, +l} with
// l = kTernaryLevel for ternary (empty for other bits).
const std::vector<double>& UnitCodebook(uint32_t bits);
// float32(UnitCodebook(bits) / sqrt(group)), each value rounded once.
std::vector<float> CqCodebook(uint32_t bits, uint32_t group);
// The 28-value header codebook: CQ2 | CQ3 | CQ4 at `group` (the stored rows of kCqTypes).
std::vector<float> HeaderCodebook(uint32_t group = 128);

}  // namespace cact
