// The Needle model's geometry: the sizes that the .cact header stores (spec section 1's
// table). formats/cact/header.h reads and writes them; everything else reads them here.
#pragma once
#include <array>
#include <cstdint>

#include "formats/needle/block.h"

namespace cact {

// Everything in the header except the tag, tensor count and codebook length. Field names
// follow the spec table; the defaults are the released Needle 2 geometry
// (formats/needle/named_geometries.h names it and the smaller ones).
struct Geometry {
  uint32_t kv_window = 256;
  uint32_t kv_bits = 8;
  uint32_t vocab = 8192;
  uint32_t d_model = 512;
  uint32_t num_heads = 8;
  uint32_t num_kv_heads = 4;
  uint32_t num_layers = 27;
  uint32_t head_dim = 64;
  uint32_t max_seq_len = 2048;
  uint32_t hada_n = 512;
  uint32_t mhc_lanes = 4;
  uint32_t engram_slots = 8192;
  uint32_t engram_sub_dim = 128;
  uint32_t num_engram_tables = 4;
  uint32_t engram_conv_taps = 4;
  uint32_t engram_conv_dilation = 3;
  uint32_t num_engram_orders = 2;
  std::array<uint32_t, 4> engram_orders = {2, 3, 0, 0};
  uint32_t num_engram_sites = 2;
  std::array<uint32_t, 4> engram_sites = {2, 15, 0, 0};
  float rope_theta = 100000.0f;
  // Not stored in the header: the block every Needle 2 file has.
  const BlockSpec* block_spec = &kNeedle2Block;

  const BlockSpec& block() const { return *block_spec; }

  // Derived sizes.
  uint32_t attn_dim() const { return num_heads * head_dim; }   // A
  uint32_t kv_dim() const { return num_kv_heads * head_dim; }  // K
  uint32_t heads_per_order() const {
    return num_engram_orders ? num_engram_tables / num_engram_orders : 0;
  }
  // Returns the engram site index whose layer is `layer`, or -1.
  int EngramSiteAt(uint32_t layer) const;
};

}  // namespace cact
