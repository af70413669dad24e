// The fast path's non-matrix numeric kernels: int8 attention, exp/sigmoid/SiLU and the
// orthonormal FWHT. Each dispatches on ActiveIsa() and gives bit-identical results on
// every ISA (same operations in the same order; the scalar code is the definition).
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/cq_kernels.h"  // ActPrecision

namespace cact::kernels {

// exp(x) for float: range reduction by ln 2 (Cody-Waite, two constants), degree-6
// polynomial, scaling by 2^n; about 1 ulp. Inputs are clamped to [-87.3, 88.3] (so tiny
// results are ~1e-38, not denormals or 0); NaN stays NaN.
float Exp(float x);
void ExpInPlace(float* x, size_t n);
// x <- 1 / (1 + Exp(-x)).
void SigmoidInPlace(float* x, size_t n);
// x <- x / (1 + Exp(-x)).
void SiluInPlace(float* x, size_t n);
// Orthonormal FWHT (butterflies h = 1, 2, 4, ..., then times float(1/sqrt(n))): the same
// bits as quant/cq/fwht.h FwhtOrthonormal. n is a power of two (below 16: the scalar code).
void FwhtOrthonormal(float* x, uint32_t n);

// One absmax scale for the vector: amax = max|x|; q = clamp(nearbyint(x * (127 / amax)),
// -127, 127); scale = amax / 127. All-zero: q = 0, scale 0; a NaN/inf: q = 0, scale NaN.
void QuantizeInt8(const float* x, uint32_t n, int8_t* q, float* scale);

// mHC post-mix: out[i][c] = fma(h[i], x[c] - u[c], sum_j P[i][j] X[j][c]) with the sum an
// fma chain over j = 0..m-1 starting from 0. X, out: [m][d]; P: [m][m].
void MixLanes(const float* P, const float* X, const float* h, const float* x, const float* u,
              uint32_t m, uint32_t d, float* out);

// Visible KV rows of one attention query as up to three runs of row indices.
struct AttentionRuns {
  size_t start[3] = {0, 0, 0};
  uint32_t count[3] = {0, 0, 0};
  int n = 0;
  void Add(size_t s, uint32_t c) {
    start[n] = s;
    count[n] = c;
    ++n;
  }
  uint32_t total() const { return count[0] + count[1] + count[2]; }
};

// The keys of one KV head, row_stride rows, in quads: the four bytes of columns 4g..4g+3
// of row r are adjacent, and rows follow each other within a quad group, so 16 consecutive
// rows of one group are 64 contiguous bytes (one VNNI operand, from any first row).
// Columns past head_dim in the last group (head_dim not a multiple of 4) are never read
// into a score (their query levels are 0).
inline size_t KeyOffset(uint32_t c, size_t r, size_t row_stride) {
  return size_t(c / 4) * 4 * row_stride + 4 * r + c % 4;
}
inline size_t KeyBytes(uint32_t head_dim, size_t row_stride) {
  return size_t((head_dim + 3) / 4) * 4 * row_stride;
}

// Attention of n_q query heads over int8 keys/values of one KV head.
//   keys_t: int8 keys in quads, element (c, r) at keys_t[KeyOffset(c, r, row_stride)];
//   values: int8 values, row r at values[r * head_dim]; key_scale/value_scale per row r.
// For each query head i (q + i * head_dim), over the rows of `runs` in order:
//   the query in int8 levels like the products' activations (ActPrecision, cq_kernels.h;
//         no rotation): amax = max_c |q_i[c]|, p = q_i[c] * (127 / amax),
//         q1 = clamp(nearbyint(p), +-127), with kInt8x2 also
//         q2 = clamp(nearbyint((p - q1) * 128), +-127);
//   D_r = sum_c q1[c] key_r[c] (kInt8), or 128 * that + sum_c q2[c] key_r[c] (kInt8x2): an
//         exact integer however it is summed, so every ISA gives the same bits;
//   s_r = float(D_r) * (key_scale[r] * qk), qk = (amax / 127) * (1 / sqrt(head_dim)), times
//         1/128 with kInt8x2 (an all-zero query scores 0; a NaN or inf in it, NaN);
//   p_r = Exp(s_r - max_r s_r); sum = sum_r p_r (16 strided partial sums, then a fixed tree);
//   out_i = sum_r ((p_r * (1 / sum)) * value_scale[r]) * value_r (fma chain over r).
// scratch: runs.total() floats per query head.
void AttendInt8(const AttentionRuns& runs, const int8_t* keys_t, size_t row_stride,
                const float* key_scale, const int8_t* values, const float* value_scale,
                uint32_t head_dim, const float* q, uint32_t n_q, ActPrecision query, float* out,
                float* scratch);

// Consecutive query tokens of one KV head attended together, so each key and value row
// is loaded and converted once for all of them (prefill). `runs` holds the union of the
// tokens' visible rows in order; token t sees the union indices [0, head[t]) and
// [from[t], to[t]) (head[t] <= from[t] <= to[t] <= runs.total()).
struct AttentionBlock {
  static constexpr uint32_t kMaxTokens = 4;
  AttentionRuns runs;
  uint32_t tokens = 0;
  uint32_t head[kMaxTokens] = {}, from[kMaxTokens] = {}, to[kMaxTokens] = {};
  // Token t's visible rows as runs (what AttendInt8 would be given for it alone).
  AttentionRuns TokenRuns(uint32_t t) const;
};

// For each token t < block.tokens, bit for bit:
//   AttendInt8(block.TokenRuns(t), ..., q + t * q_stride, n_q, query, out + t * out_stride, ...).
// scratch: AttendBlockScratch(block.runs.total(), n_q) floats.
void AttendInt8Block(const AttentionBlock& block, const int8_t* keys_t, size_t row_stride,
                     const float* key_scale, const int8_t* values, const float* value_scale,
                     uint32_t head_dim, const float* q, size_t q_stride, uint32_t n_q,
                     ActPrecision query, float* out, size_t out_stride, float* scratch);
inline size_t AttendBlockScratch(uint32_t rows, uint32_t n_q) {
  return (n_q > 17 ? n_q : 17) * (size_t(rows) + 16);
}

}  // namespace cact::kernels
