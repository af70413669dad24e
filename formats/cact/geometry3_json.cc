#include "formats/cact/geometry3_json.h"

namespace cact {

nlohmann::ordered_json Geometry3ToJson(const Geometry3& g) {
  return nlohmann::ordered_json{{"kv_window", g.kv_window},
                                {"kv_bits", g.kv_bits},
                                {"vocab", g.vocab},
                                {"out_vocab", g.out_vocab},
                                {"d_model", g.d_model},
                                {"num_heads", g.num_heads},
                                {"num_kv_heads", g.num_kv_heads},
                                {"num_layers", g.num_layers},
                                {"qk_head_dim", g.qk_head_dim},
                                {"v_head_dim", g.v_head_dim},
                                {"max_seq_len", g.max_seq_len},
                                {"hada_n", g.hada_n},
                                {"mhc_lanes", g.mhc_lanes},
                                {"sliding_window", g.sliding_window},
                                {"global_mask_lo", g.global_mask_lo},
                                {"global_mask_hi", g.global_mask_hi},
                                {"qkv_conv_taps", g.qkv_conv_taps},
                                {"engram_slots", g.engram_slots},
                                {"engram_sub_dim", g.engram_sub_dim},
                                {"num_engram_tables", g.num_engram_tables},
                                {"engram_conv_taps", g.engram_conv_taps},
                                {"engram_conv_dilation", g.engram_conv_dilation},
                                {"engram_seed_heads", g.engram_seed_heads},
                                {"num_engram_orders", g.num_engram_orders},
                                {"engram_orders", g.engram_orders},
                                {"num_engram_sites", g.num_engram_sites},
                                {"engram_sites", g.engram_sites},
                                {"rope_theta", g.rope_theta}};
}

}  // namespace cact
