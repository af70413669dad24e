// IEEE binary16 conversion identical to numpy's astype(float16): round to nearest even,
// subnormals, overflow to inf, NaN preserved.
#pragma once
#include <cstdint>
#include <cstring>

namespace cact {

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

inline uint16_t LoadU16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }
inline float LoadF32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

}  // namespace cact
