// IEEE binary16 and bfloat16 bit conversions (round to nearest even, subnormals, overflow
// to inf, NaN kept NaN). The one implementation: safetensors, .npy, quant/fp16
// and the tools all use it.
#pragma once
#include <cstdint>

namespace cact {

uint16_t FloatToHalfBits(float f);
float HalfBitsToFloat(uint16_t h);
uint16_t FloatToBf16Bits(float f);
float Bf16BitsToFloat(uint16_t b);

}  // namespace cact
