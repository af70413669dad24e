// quant's FP16 names for the one converter in lib/float16 (numpy astype(float16) exact).
#include "quant/cq/fp16.h"

#include "lib/float16.h"

namespace cact {

uint16_t FloatToHalf(float f) { return FloatToHalfBits(f); }
float HalfToFloat(uint16_t h) { return HalfBitsToFloat(h); }

}  // namespace cact
