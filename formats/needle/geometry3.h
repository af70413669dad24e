// The Needle 3 geometry: the sizes a generation-3 .cact header stores (formats/cact/header3.h
// reads and writes them). A second description beside Geometry (Needle 2): generation 3
// separates the query/key and value head widths, adds QKV convolution taps, a sliding window
// with a global-layer mask, a tied output slice and up to 16 engram sites.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

namespace cact {

// Rank of the Hadamard MLP's conditioning (cond_v [d_model, r], cond_u [r, hada_n]): a
// constant of the Needle 3 block, not stored in the header.
inline constexpr uint32_t kHadaCondRank = 8;
inline constexpr uint32_t kMaxEngramSites3 = 16;
inline constexpr uint32_t kMaxLayers3 = 64;  // the global mask has 64 bits

struct Geometry3 {
  uint32_t kv_window = 0;
  uint32_t kv_bits = 8;
  uint32_t vocab = 0;
  uint32_t out_vocab = 0;  // rows of the tied output head; 0 = the whole vocab
  uint32_t d_model = 0;
  uint32_t num_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t num_layers = 0;
  uint32_t qk_head_dim = 0;
  uint32_t v_head_dim = 0;
  uint32_t max_seq_len = 0;
  uint32_t hada_n = 0;
  uint32_t mhc_lanes = 0;
  uint32_t sliding_window = 0;
  uint32_t global_mask_lo = 0, global_mask_hi = 0;  // layer i is global when bit i is set
  uint32_t qkv_conv_taps = 0;                       // 0 = no QKV convolution
  uint32_t engram_slots = 0;
  uint32_t engram_sub_dim = 0;
  uint32_t num_engram_tables = 0;
  uint32_t engram_conv_taps = 0;
  uint32_t engram_conv_dilation = 0;
  uint32_t engram_seed_heads = 0;  // hash seed stride; 0 = heads per order
  uint32_t num_engram_orders = 0;
  std::array<uint32_t, 4> engram_orders = {};
  uint32_t num_engram_sites = 0;
  std::array<uint32_t, kMaxEngramSites3> engram_sites = {};
  float rope_theta = 0;

  uint64_t global_mask() const { return uint64_t(global_mask_hi) << 32 | global_mask_lo; }
  bool IsGlobalLayer(uint32_t layer) const { return layer < 64 && (global_mask() >> layer & 1); }
  uint32_t q_dim() const { return num_heads * qk_head_dim; }        // q_proj rows
  uint32_t k_dim() const { return num_kv_heads * qk_head_dim; }     // k_proj rows
  uint32_t v_dim() const { return num_kv_heads * v_head_dim; }      // v_proj rows
  uint32_t attn_out_dim() const { return num_heads * v_head_dim; }  // out_proj columns
  uint32_t output_rows() const { return out_vocab ? out_vocab : vocab; }
  // The Monarch factorisation hada_n = a * b, a = 2^(bit_length(hada_n - 1) / 2): the
  // exporter's split (32 x 32 for 1024, 16 x 32 for 512).
  std::pair<uint32_t, uint32_t> hada_blocks() const {
    uint32_t bits = 0;
    while (hada_n > 1 && ((hada_n - 1) >> bits) != 0) ++bits;
    const uint32_t a = 1u << (bits / 2);
    return {a, hada_n / a};
  }
};

}  // namespace cact
