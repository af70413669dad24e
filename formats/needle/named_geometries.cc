#include "formats/needle/named_geometries.h"

namespace cact {

Geometry Needle2Geometry() { return Geometry{}; }

Geometry SmallGeometry() {
  Geometry g;
  g.kv_window = 64;
  g.vocab = 512;
  g.d_model = 128;
  g.num_heads = 4;
  g.num_kv_heads = 2;
  g.num_layers = 4;
  g.head_dim = 32;
  g.max_seq_len = 512;
  g.hada_n = 128;
  g.engram_slots = 256;
  g.engram_sub_dim = 64;
  g.num_engram_tables = 2;  // one head per order
  g.engram_sites = {1, 3, 0, 0};
  return g;
}

// The Needle block structure at a size that trains on two cores in under half an hour:
// the 512-piece Debian tokenizer, 2 engram sites, 4 mHC lanes as released.
Geometry ReferenceGeometry() {
  Geometry g;
  g.vocab = 512;
  g.d_model = 256;
  g.hada_n = 256;
  g.num_heads = 4;
  g.num_kv_heads = 2;
  g.head_dim = 64;
  g.num_layers = 4;
  g.max_seq_len = 1024;
  g.kv_window = 256;
  g.engram_slots = 4096;
  g.num_engram_tables = 2;  // one table per order (2 and 3)
  g.engram_sub_dim = 128;   // tables x sub = d_model
  g.num_engram_sites = 2;
  g.engram_sites = {1, 3, 0, 0};
  return g;
}

Geometry TinyGeometry() {
  Geometry g = ReferenceGeometry();
  g.d_model = 128;
  g.hada_n = 128;
  g.num_heads = 2;
  g.num_kv_heads = 1;
  g.head_dim = 64;
  g.num_layers = 2;
  g.max_seq_len = 128;
  g.kv_window = 64;
  g.engram_slots = 256;
  g.engram_sub_dim = 64;
  g.engram_sites = {1, 0, 0, 0};
  g.num_engram_sites = 1;
  return g;
}

Geometry MicroGeometry() {
  Geometry g;
  g.kv_window = 16;
  g.vocab = 32;
  g.d_model = 16;
  g.num_heads = 2;
  g.num_kv_heads = 1;
  g.num_layers = 2;
  g.head_dim = 8;
  g.max_seq_len = 64;
  g.hada_n = 16;
  g.mhc_lanes = 2;
  g.engram_slots = 8;
  g.engram_sub_dim = 8;
  g.num_engram_tables = 2;
  g.engram_conv_taps = 4;
  g.engram_conv_dilation = 3;
  g.num_engram_orders = 2;
  g.engram_orders = {2, 3, 0, 0};
  g.num_engram_sites = 1;
  g.engram_sites = {1, 0, 0, 0};
  g.rope_theta = 10000.0f;
  return g;
}

const std::vector<NamedGeometry>& NamedGeometries() {
  static const std::vector<NamedGeometry> all = {{"needle2", Needle2Geometry},
                                                 {"small", SmallGeometry},
                                                 {"reference", ReferenceGeometry},
                                                 {"tiny", TinyGeometry},
                                                 {"micro", MicroGeometry}};
  return all;
}

std::optional<Geometry> FindNamedGeometry(std::string_view name) {
  for (const NamedGeometry& g : NamedGeometries())
    if (g.name == name) return g.make();
  return std::nullopt;
}

Geometry3 Needle3Geometry() { return Geometry3{}; }

Geometry3 SmallGeometry3() {
  Geometry3 g;
  g.kv_window = 16;
  g.vocab = 64;
  g.out_vocab = 48;
  g.d_model = 64;
  g.num_heads = 4;
  g.num_layers = 3;
  g.qk_head_dim = 16;
  g.v_head_dim = 8;
  g.max_seq_len = 128;
  g.hada_n = 64;
  g.mhc_lanes = 2;
  g.sliding_window = 16;
  g.global_mask_lo = 1u << 2;
  g.engram_slots = 16;
  g.engram_sub_dim = 32;
  g.num_engram_tables = 2;  // one table per order
  g.num_engram_sites = 2;
  g.engram_sites = {0, 2};
  g.rope_theta = 10000.0f;
  return g;
}

Geometry3 MicroGeometry3() {
  Geometry3 g = SmallGeometry3();
  g.vocab = g.out_vocab = 32;
  g.d_model = 32;
  g.hada_n = 32;
  g.num_heads = 2;
  g.num_kv_heads = 1;
  g.num_layers = 2;
  g.qk_head_dim = 8;
  g.engram_slots = 8;
  g.engram_sub_dim = 16;
  g.global_mask_lo = 1u << 1;
  g.num_engram_sites = 1;
  g.engram_sites = {1};
  return g;
}

}  // namespace cact
