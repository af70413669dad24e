#include "lib/float16.h"

#include <cstring>

namespace cact {

namespace {
uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

uint16_t FloatToHalfBits(float f) {
  const uint32_t u = Bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t exp = (u >> 23) & 0xFF;
  uint32_t mant = u & 0x7FFFFF;
  if (exp == 0xFF) {  // inf or NaN: keep NaN a NaN even when its payload is in the low bits
    if (mant == 0) return sign | 0x7C00;
    uint16_t m = uint16_t(mant >> 13);
    return sign | 0x7C00 | (m ? m : 1);
  }
  const int e = int(exp) - 127 + 15;  // rebias
  if (e >= 31) return sign | 0x7C00;  // overflow (also catches values that round up below)
  if (e <= 0) {                       // subnormal half (or zero)
    if (e < -10) return sign;         // below half the smallest subnormal: rounds to zero
    mant |= 0x800000;                 // implicit leading one
    const int shift = 14 - e;         // 14..24
    const uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    uint32_t r = half + (rem > midpoint || (rem == midpoint && (half & 1)));
    return sign | uint16_t(r);  // a carry into bit 10 correctly yields the smallest normal
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // carry may overflow into inf: correct
  return sign | uint16_t(h);
}

float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return FromBits(sign | 0x7F800000 | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return FromBits(sign);
    int e = -14;  // normalise the subnormal
    while (!(mant & 0x400)) {
      mant <<= 1;
      --e;
    }
    mant &= 0x3FF;
    return FromBits(sign | (uint32_t(e + 127) << 23) | (mant << 13));
  }
  return FromBits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToBf16Bits(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7F800000) == 0x7F800000 && (u & 0x7FFFFF))
    return uint16_t((u >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return uint16_t((u + rounding) >> 16);
}

float Bf16BitsToFloat(uint16_t b) { return FromBits(uint32_t(b) << 16); }

}  // namespace cact
