// Per-ISA entry points of fast_ops.h.
#pragma once
#include "engine/kernels/fast_ops.h"

namespace cact::kernels::internal {

struct FastOpsTable {
  void (*exp)(float* x, size_t n);
  void (*sigmoid)(float* x, size_t n);
  void (*silu)(float* x, size_t n);
  void (*fwht)(float* x, uint32_t n);
  void (*attend)(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                 const float* key_scale, const int8_t* values, const float* value_scale,
                 uint32_t head_dim, const float* q, uint32_t n_q, ActPrecision query, float* out,
                 float* scratch);
  void (*attend_block)(const AttentionBlock& block, const int8_t* keys_t, size_t row_stride,
                       const float* key_scale, const int8_t* values, const float* value_scale,
                       uint32_t head_dim, const float* q, size_t q_stride, uint32_t n_q,
                       ActPrecision query, float* out, size_t out_stride, float* scratch);
  void (*quantize)(const float* x, uint32_t n, int8_t* q, float* scale);
  void (*mix)(const float* P, const float* X, const float* h, const float* x, const float* u,
              uint32_t m, uint32_t d, float* out);
};

const FastOpsTable& ScalarFastOps();
const FastOpsTable& Avx2FastOps();  // also AVX-VNNI: these kernels have no int8 dots
const FastOpsTable& Avx512FastOps();

// The attention score factor of a query quantized with absmax `amax` (fast_ops.h): NaN when
// amax is not finite. One definition for every ISA.
float QueryScoreScale(float amax, uint32_t hd, ActPrecision query);

// The SIMD attention kernels' largest head dimension (their stack buffers); larger heads
// take the scalar code.
inline constexpr uint32_t kSimdMaxHeadDim = 256;

// exp constants shared by every implementation.
inline constexpr float kExpLo = -87.3f, kExpHi = 88.3f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187045e-06f;
inline constexpr float kExpC[7] = {1.f, 1.f, 0.5f, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720};

}  // namespace cact::kernels::internal
