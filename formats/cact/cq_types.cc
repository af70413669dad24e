#include "formats/cact/cq_types.h"

#include <cmath>
#include <cstring>

namespace cact {

std::string WidthName(uint32_t record_bits) {
  const CqType* t = FindCqType(record_bits);
  return t ? t->width : std::to_string(record_bits);
}

std::string CqTypeName(uint32_t record_bits) { return "CQ" + WidthName(record_bits); }

float ScaleUnitLevel(double unit, uint32_t group) { return float(unit / std::sqrt(double(group))); }

uint32_t InferCodebookGroup(const float* cq2_values) {
  for (uint32_t group = kMinCqGroup; IsValidCqGroup(group); group <<= 1) {
    bool same = true;
    for (int i = 0; i < 4 && same; ++i) {
      const float want = ScaleUnitLevel(kUnitCq2Levels[i], group);
      same = std::memcmp(&want, &cq2_values[i], sizeof want) == 0;
    }
    if (same) return group;
  }
  return 0;
}

}  // namespace cact
