#include "formats/cact/header_checks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "lib/status.h"

namespace cact {

uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

bool HeaderChecker::Check(bool ok, int index, const std::string& what) {
  if (!ok && status_.ok())
    status_ = FormatError(file_, "header." + field_name_(index), uint64_t(index) * 4, what);
  return ok && status_.ok();
}

bool HeaderChecker::Range(uint32_t v, uint32_t lo, uint32_t hi, int index) {
  return Check(v >= lo && v <= hi, index,
               absl::StrFormat("%d is outside the allowed range [%d, %d]", v, lo, hi));
}

void HeaderChecker::CodebookLen(uint32_t v, int index) {
  Check(v == 28, index, absl::StrFormat("%d but the CQ2|CQ3|CQ4 codebooks need 4+8+16 = 28", v));
}

void HeaderChecker::KvBits(uint32_t v, int index) {
  Check(v == 2 || v == 3 || v == 4 || v == 8, index,
        absl::StrFormat("%d is not one of 2, 3, 4, 8", v));
}

void HeaderChecker::Heads(uint32_t heads, int heads_index, uint32_t kv_heads, int kv_index) {
  Range(heads, 1, 4096, heads_index);
  if (Range(kv_heads, 1, 4096, kv_index))
    Check(heads % kv_heads == 0, kv_index,
          absl::StrFormat("%d does not divide num_heads %d", kv_heads, heads));
}

void HeaderChecker::HeadWidth(uint32_t heads, uint32_t width, bool rotated, int index) {
  if (!Range(width, rotated ? 2 : 1, 4096, index)) return;
  if (rotated &&
      !Check(width % 2 == 0, index,
             absl::StrFormat("%d is odd (RoPE rotates the two halves of a head)", width)))
    return;
  Check(uint64_t(heads) * width <= (1u << 16), index,
        absl::StrFormat("num_heads %d x %s %d is larger than 65536", heads, field_name_(index),
                        width));
}

void HeaderChecker::HadaN(uint32_t hada_n, uint32_t d_model, int index) {
  if (ok())
    Check(hada_n == NextPow2(d_model), index,
          absl::StrFormat("%d but the smallest power of two >= d_model %d is %d", hada_n, d_model,
                          NextPow2(d_model)));
}

void HeaderChecker::TableRows(uint32_t tables, uint32_t slots, int slots_index) {
  if (ok())
    Check(uint64_t(tables) * slots <= UINT32_MAX, slots_index,
          absl::StrFormat("num_engram_tables %d x engram_slots %d rows do not fit a u32 shape",
                          tables, slots));
}

uint32_t HeaderChecker::EngramOrders(uint32_t count, const std::array<uint32_t, 4>& orders,
                                     int count_index, int first_index, uint32_t tables,
                                     int tables_index, uint32_t dilation, int dilation_index) {
  if (!Range(count, 1, 4, count_index)) return 0;
  uint32_t max_order = 0;
  for (uint32_t i = 0; i < 4 && ok(); ++i) {
    const uint32_t o = orders[i];
    if (i < count) {
      Range(o, 1, 64, first_index + int(i));
      max_order = std::max(max_order, o);
    } else {
      Check(o == 0, first_index + int(i),
            absl::StrFormat("%d beyond num_engram_orders %d (must be 0)", o, count));
    }
  }
  if (ok())
    Check(tables % count == 0, tables_index,
          absl::StrFormat("%d is not num_engram_orders %d x heads per order", tables, count));
  if (ok())
    Check(dilation == max_order, dilation_index,
          absl::StrFormat("%d but the largest engram order is %d", dilation, max_order));
  return ok() ? max_order : 0;
}

void HeaderChecker::EngramSites(uint32_t count, std::span<const uint32_t> sites,
                                uint32_t num_layers, int count_index, int first_index) {
  if (!Range(count, 0, uint32_t(sites.size()), count_index)) return;
  for (uint32_t i = 0; i < sites.size() && ok(); ++i) {
    const uint32_t s = sites[i];
    const int index = first_index + int(i);
    if (i >= count) {
      Check(s == 0, index, absl::StrFormat("%d beyond num_engram_sites %d (must be 0)", s, count));
    } else if (Check(
                   s < num_layers, index,
                   absl::StrFormat("site %d at layer %d but num_layers is %d", i, s, num_layers)) &&
               i > 0) {
      Check(s > sites[i - 1], index,
            absl::StrFormat("site %d at layer %d is not after site %d at layer %d", i, s, i - 1,
                            sites[i - 1]));
    }
  }
}

void HeaderChecker::RopeTheta(float v, int index) {
  Check(std::isfinite(v) && v > 0, index, absl::StrFormat("%g is not a finite positive number", v));
}

}  // namespace cact
