// float32 <-> IEEE binary16 with integer arithmetic only, so the result does not depend on
// the CPU (no F16C) and matches numpy's astype(float16) bit for bit.
#include "quant/fp16.h"

namespace cact {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Shifts `m` right by `shift` (>= 1) rounding to nearest, ties to even.
uint32_t ShiftRoundEven(uint32_t m, uint32_t shift) {
  if (shift >= 32) return 0;  // value < 2^-25 of a unit: rounds to 0 (m < 2^24)
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return q;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x = FloatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {  // inf or NaN
    if (x == 0x7F800000u) return sign | 0x7C00u;
    // NaN: keep the top payload bits (numpy does), but never turn it into inf.
    uint16_t payload = uint16_t((x & 0x007FFFFFu) >> 13);
    return sign | 0x7C00u | (payload ? payload : 1u);
  }
  uint32_t exp = x >> 23;  // biased float exponent
  if (exp >= 143) return sign | 0x7C00u;  // >= 2^16: overflow to inf
  if (exp >= 113) {
    // Normal half range (2^-14 <= |f| < 2^16). Rounding may carry into the exponent,
    // including up to 0x7C00 (inf) for |f| >= 65520: that is exactly IEEE behaviour.
    uint32_t h = ((exp - 112) << 10) | ((x >> 13) & 0x3FFu);
    uint32_t rem = x & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  // Subnormal half (or zero): result = round(|f| / 2^-24). |f| = m * 2^(exp-150).
  if (exp == 0) return sign;  // float subnormals are far below half's smallest step
  uint32_t m = (x & 0x007FFFFFu) | 0x00800000u;
  return uint16_t(sign | ShiftRoundEven(m, 126 - exp));
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000u | (man << 13));  // inf / NaN kept
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return BitsFloat(sign);
  // Subnormal half: exactly man * 2^-24, representable as a normal float.
  int shift = 0;
  while (!(man & 0x400u)) {
    man <<= 1;
    ++shift;
  }
  return BitsFloat(sign | uint32_t(113 - shift) << 23 | ((man & 0x3FFu) << 13));
}

}  // namespace cact
