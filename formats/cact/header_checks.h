// The header field checks that both generations make alike. Each header keeps its own word
// order and field names (header.cc, header3.cc) and calls these in its own order, by word
// index; the first failed check is the error, "FILE: header.FIELD at offset 4*INDEX: WHAT".
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace cact {

// Bounds every single size so that the products made from a header stay far from overflow
// and absurd headers are refused before anything is sized from them.
inline constexpr uint32_t kMaxHeaderDim = 1u << 24;

class HeaderChecker {
 public:
  using FieldName = std::string (*)(int index);  // "engram_sites[1]" for word 26
  HeaderChecker(const std::string& file, FieldName field_name)
      : file_(file), field_name_(field_name) {}

  // False when `ok` is false or an earlier check failed, so that a later check may rely on
  // (divide by) what the earlier ones bounded.
  bool Check(bool ok, int index, const std::string& what);
  bool Range(uint32_t v, uint32_t lo, uint32_t hi, int index);
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

  void CodebookLen(uint32_t v, int index);  // 28: the CQ2, CQ3 and CQ4 codebooks
  void KvBits(uint32_t v, int index);       // 2, 3, 4 or 8
  // Both in [1, 4096], num_kv_heads dividing num_heads.
  void Heads(uint32_t num_heads, int heads_index, uint32_t num_kv_heads, int kv_index);
  // A head width in [1, 4096] (even when RoPE rotates its halves), num_heads x width <= 65536.
  void HeadWidth(uint32_t num_heads, uint32_t width, bool rotated, int index);
  void HadaN(uint32_t hada_n, uint32_t d_model, int index);  // smallest power of two >= d_model
  // num_engram_tables x engram_slots rows fit a u32 shape.
  void TableRows(uint32_t tables, uint32_t slots, int slots_index);
  // 1..4 orders in [1, 64], unused entries 0; tables a multiple of the order count; the conv
  // dilation the largest order. Returns that order (0 after an error).
  uint32_t EngramOrders(uint32_t count, const std::array<uint32_t, 4>& orders, int count_index,
                        int first_index, uint32_t tables, int tables_index, uint32_t dilation,
                        int dilation_index);
  // 0..sites.size() sites, strictly increasing and below num_layers, unused entries 0.
  void EngramSites(uint32_t count, std::span<const uint32_t> sites, uint32_t num_layers,
                   int count_index, int first_index);
  void RopeTheta(float v, int index);  // finite and > 0

 private:
  const std::string& file_;
  FieldName field_name_;
  absl::Status status_ = absl::OkStatus();
};

// The smallest power of two >= v (1 for 0).
uint32_t NextPow2(uint32_t v);

}  // namespace cact
