// The small numeric building blocks of the Needle forward pass (spec section 3), written
// plainly in FP32. The reference path is made of these; the fast path reuses the ones
// that are not matrix products (norms, RoPE, Sinkhorn, engram hashing).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "formats/needle/block.h"

// The block's constants (norm eps, Sinkhorn iterations, engram hash) come in as parameters,
// from BlockSpec (formats/needle/block.h): nothing here restates them.
namespace cact::ops {

float Sigmoid(float x);
float Silu(float x);

// Dot product with eight interleaved partial sums (deterministic, vectorisable).
float Dot(const float* a, const float* b, size_t n);

// rms_unit: y = x / sqrt(mean(x^2) + eps). y may alias x.
void RmsUnit(const float* x, size_t n, float eps, float* y);
// ZCN: y = (1 + g) * x / sqrt(mean(x^2) + eps) (g is stored as an offset). y may alias x.
void Zcn(const float* x, const float* g, size_t n, float eps, float* y);

// y[r] = dot(w[r, :], x) for a row-major [rows, cols] matrix; OpenMP over rows when the
// matrix is large and threads > 1.
void MatVec(const float* w, size_t rows, size_t cols, const float* x, float* y, int threads = 1);

// RoPE inverse frequencies theta^(-2i/hd), i < hd/2, computed in float32 the way the
// official JAX code does (1 / theta**(2i/hd)).
std::vector<float> RopeInvFreq(uint32_t head_dim, float theta);
// Half-split RoPE in place on one head vector: dim i pairs with i + hd/2,
// [x1 cos - x2 sin, x2 cos + x1 sin] at angle float(pos) * inv_freq[i].
void RopeHalfSplit(float* x, uint32_t head_dim, uint32_t pos, std::span<const float> inv_freq);

// Log-space Sinkhorn on an m x m matrix (row-major, in place): `iters` times subtract each
// row's logsumexp then each column's logsumexp; finally exponentiate. Result is (nearly)
// doubly stochastic.
void SinkhornLog(float* a, uint32_t m, int iters);

// Engram hash of table `table` (= order_index * heads_per_order + head) for an n-gram of
// `order` tokens ending at position t of `history` (positions before 0 count as token 0):
// acc = EngramHashStart(block, table); acc = (acc ^ tok[t-j]) * hash_prime for j < order;
// acc ^= acc >> hash_shift; slot = acc % slots. All arithmetic is uint32 with wrap-around.
uint32_t EngramSlot(const BlockSpec& block, uint32_t table, uint32_t order,
                    std::span<const int32_t> history, size_t t, uint32_t slots);

}  // namespace cact::ops
