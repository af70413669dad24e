// IEEE binary16 and bfloat16 bit conversions (round to nearest even, subnormals, overflow
// to inf, NaN kept NaN). Lives in formats/ so safetensors F16/BF16 need nothing from
// quant/; quant/fp16 may forward to these.
#pragma once
#include <cstdint>

namespace cact {

uint16_t FloatToHalfBits(float f);
float HalfBitsToFloat(uint16_t h);
uint16_t FloatToBf16Bits(float f);
float Bf16BitsToFloat(uint16_t b);

}  // namespace cact
