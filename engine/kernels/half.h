// IEEE binary16 -> float, exact, portable (no F16C needed). Used by the scalar kernels.
#pragma once
#include <cstdint>
#include <cstring>

namespace cact::kernels {

inline float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while (!(man & 0x400u));
    bits = sign | uint32_t(112 - e) << 23 | ((man & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t LoadHalfBits(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

}  // namespace cact::kernels
