// The Needle block: its stages in order and the constants they use. Every executor (the
// FP32 reference, the fast path, the TorchScript emitter and the libtorch trainer) reads
// them from here, through Geometry::block(); nothing restates them. A later generation of
// the architecture is a second BlockSpec beside kNeedle2Block.
#pragma once
#include <array>
#include <cstdint>

namespace cact {

// One layer's steps, in the order a token goes through them (spec section 3).
enum class BlockStage : uint8_t {
  kPreMix,       // nx = rms_unit(X); mHC projections; u = sum_j h_pre[j] X[j]
  kEngram,       // bx = u + sigmoid(rms_unit(u) . rms_unit(k) / sqrt(d)) v' (sites only)
  kAttention,    // bx += sigmoid(attn_gate) ZCN(out_proj(softmax(q k / sqrt(hd)) v * gate))
  kHadamardMlp,  // bx += (d3 FWHT(silu(d2 FWHT(d1 ZCN(bx)))))[:d]
  kPostMix,      // X <- Sinkhorn(res) X + h_post (bx - u)
};
inline constexpr int kBlockStages = 5;
const char* BlockStageName(BlockStage s);  // "pre-mix", "engram", ...

// How RoPE pairs the dimensions of a head.
enum class RopePairing : uint8_t {
  kHalfSplit,  // dimension i with i + hd/2 (not even/odd)
};

struct BlockSpec {
  const char* name;  // "needle2"
  std::array<BlockStage, kBlockStages> stages;

  float norm_eps;  // inside the square root of every RMS norm (rms_unit, ZCN)

  // mHC lane offsets: layer l's selected lane is l % lanes.
  float pre_offset_selected, pre_offset_other;    // added to h_pre's logits
  float post_offset_selected, post_offset_other;  // added to h_post's logits
  float post_gain;                                // h_post = post_gain * sigmoid(...)
  int sinkhorn_iters;                             // row then column normalisations

  // Engram hash of table t over the last `order` tokens (uint32, wrapping):
  // acc = hash_seed * (t + 1); acc = (acc ^ token) * hash_prime per token, newest first;
  // acc ^= acc >> hash_shift; slot = acc % slots.
  uint32_t hash_seed, hash_prime, hash_shift;

  RopePairing rope_pairing;
};

inline constexpr BlockSpec kNeedle2Block = {
    .name = "needle2",
    .stages = {BlockStage::kPreMix, BlockStage::kEngram, BlockStage::kAttention,
               BlockStage::kHadamardMlp, BlockStage::kPostMix},
    .norm_eps = 1e-6f,
    .pre_offset_selected = 4.0f,
    .pre_offset_other = -4.0f,
    .post_offset_selected = 0.0f,
    .post_offset_other = -4.0f,
    .post_gain = 2.0f,
    .sinkhorn_iters = 20,
    .hash_seed = 0x9E3779B9u,
    .hash_prime = 0x01000193u,
    .hash_shift = 15,
    .rope_pairing = RopePairing::kHalfSplit,
};

// The engram hash's starting value for table t (uint32, wrapping).
constexpr uint32_t EngramHashStart(const BlockSpec& b, uint32_t table) {
  return b.hash_seed * (table + 1u);
}

}  // namespace cact
