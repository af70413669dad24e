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

// Everything in the header except the tag, tensor count and codebook length, by the
// exporter's names. The defaults are the shipped needle3.cact's geometry
// (formats/needle/named_geometries.h names it and the smaller ones).
struct Geometry3 {
  uint32_t kv_window = 256;
  uint32_t kv_bits = 8;
  uint32_t vocab = 8192;
  uint32_t out_vocab = 8192;  // rows of the tied output head; 0 = the whole vocab
  uint32_t d_model = 768;
  uint32_t num_heads = 12;
  uint32_t num_kv_heads = 2;
  uint32_t num_layers = 20;
  uint32_t qk_head_dim = 48;
  uint32_t v_head_dim = 64;
  uint32_t max_seq_len = 8192;
  uint32_t hada_n = 1024;
  uint32_t mhc_lanes = 4;
  uint32_t sliding_window = 1024;
  // Layer i is global when bit i is set: layers 4, 9, 14 and 19.
  uint32_t global_mask_lo = (1u << 4) | (1u << 9) | (1u << 14) | (1u << 19), global_mask_hi = 0;
  uint32_t qkv_conv_taps = 3;  // 0 = no QKV convolution
  uint32_t engram_slots = 18432;
  uint32_t engram_sub_dim = 128;
  uint32_t num_engram_tables = 6;
  uint32_t engram_conv_taps = 4;
  uint32_t engram_conv_dilation = 3;
  uint32_t engram_seed_heads = 0;  // hash seed stride; 0 = heads per order
  uint32_t num_engram_orders = 2;
  std::array<uint32_t, 4> engram_orders = {2, 3, 0, 0};
  uint32_t num_engram_sites = 5;
  std::array<uint32_t, kMaxEngramSites3> engram_sites = {3, 7, 11, 15, 19};
  float rope_theta = 100000.0f;

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

// Every field of Geometry3 in header order with its name: the one list that the header
// reader and writer, their error messages and the JSON follow. `fn(name, field)` is called
// with uint32_t, std::array<uint32_t, N> and (last) float fields; G may be const.
template <typename G, typename Fn>
void ForEachGeometry3Field(G& g, Fn&& fn) {
  fn("kv_window", g.kv_window);
  fn("kv_bits", g.kv_bits);
  fn("vocab", g.vocab);
  fn("out_vocab", g.out_vocab);
  fn("d_model", g.d_model);
  fn("num_heads", g.num_heads);
  fn("num_kv_heads", g.num_kv_heads);
  fn("num_layers", g.num_layers);
  fn("qk_head_dim", g.qk_head_dim);
  fn("v_head_dim", g.v_head_dim);
  fn("max_seq_len", g.max_seq_len);
  fn("hada_n", g.hada_n);
  fn("mhc_lanes", g.mhc_lanes);
  fn("sliding_window", g.sliding_window);
  fn("global_mask_lo", g.global_mask_lo);
  fn("global_mask_hi", g.global_mask_hi);
  fn("qkv_conv_taps", g.qkv_conv_taps);
  fn("engram_slots", g.engram_slots);
  fn("engram_sub_dim", g.engram_sub_dim);
  fn("num_engram_tables", g.num_engram_tables);
  fn("engram_conv_taps", g.engram_conv_taps);
  fn("engram_conv_dilation", g.engram_conv_dilation);
  fn("engram_seed_heads", g.engram_seed_heads);
  fn("num_engram_orders", g.num_engram_orders);
  fn("engram_orders", g.engram_orders);
  fn("num_engram_sites", g.num_engram_sites);
  fn("engram_sites", g.engram_sites);
  fn("rope_theta", g.rope_theta);
}

}  // namespace cact
