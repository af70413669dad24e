// Machine limits for the benchmark's roofline: read bandwidth over a buffer (L3 when the
// buffer is the size of a model's codes) and int8 dot-product throughput, both with the
// best kernel ISA of this CPU, on `threads` threads (a Team).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cact::kernels {

// GB/s reading a `bytes` buffer repeatedly for about `seconds` (each thread reads its own
// contiguous share of the same buffer; the best of several passes).
double MeasureReadBandwidth(size_t bytes, uint32_t threads, double seconds = 0.2);
// Peak int8 multiply-adds per second (G MAC/s) of the active ISA's dot instruction
// (vpdpbusd, or maddubs+madd on AVX2 without VNNI) on independent accumulators.
double MeasureInt8Throughput(uint32_t threads, double seconds = 0.2);

}  // namespace cact::kernels
