#include "formats/cact/header3.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

namespace {

// Word indices of '<48If' (byte offset = 4 * index).
enum Field : int {
  kTag,
  kNumTensors,
  kCodebookLen,
  kKvWindow,
  kKvBits,
  kVocab,
  kOutVocab,
  kDModel,
  kNumHeads,
  kNumKvHeads,
  kNumLayers,
  kQkHeadDim,
  kVHeadDim,
  kMaxSeqLen,
  kHadaN,
  kMhcLanes,
  kSlidingWindow,
  kGlobalMaskLo,
  kGlobalMaskHi,
  kQkvConvTaps,
  kEngramSlots,
  kEngramSubDim,
  kNumEngramTables,
  kEngramConvTaps,
  kEngramConvDilation,
  kEngramSeedHeads,
  kNumEngramOrders,
  kEngramOrders,
  kNumEngramSites = kEngramOrders + 4,
  kEngramSites,
  kRopeTheta = kEngramSites + 16,
};
static_assert(kRopeTheta == 48 && kRopeTheta * 4 + 4 == kHeader3Bytes);

constexpr const char* kScalarNames[] = {"tag",
                                        "num_tensors",
                                        "codebook_len",
                                        "kv_window",
                                        "kv_bits",
                                        "vocab",
                                        "out_vocab",
                                        "d_model",
                                        "num_heads",
                                        "num_kv_heads",
                                        "num_layers",
                                        "qk_head_dim",
                                        "v_head_dim",
                                        "max_seq_len",
                                        "hada_n",
                                        "mhc_lanes",
                                        "sliding_window",
                                        "global_mask_lo",
                                        "global_mask_hi",
                                        "qkv_conv_taps",
                                        "engram_slots",
                                        "engram_sub_dim",
                                        "num_engram_tables",
                                        "engram_conv_taps",
                                        "engram_conv_dilation",
                                        "engram_seed_heads",
                                        "num_engram_orders"};

// The 48 u32 words in header order.
std::array<uint32_t*, 48> Words(Header3& h) {
  Geometry3& g = h.geometry;
  std::array<uint32_t*, 48> w = {&h.tag,
                                 &h.num_tensors,
                                 &h.codebook_len,
                                 &g.kv_window,
                                 &g.kv_bits,
                                 &g.vocab,
                                 &g.out_vocab,
                                 &g.d_model,
                                 &g.num_heads,
                                 &g.num_kv_heads,
                                 &g.num_layers,
                                 &g.qk_head_dim,
                                 &g.v_head_dim,
                                 &g.max_seq_len,
                                 &g.hada_n,
                                 &g.mhc_lanes,
                                 &g.sliding_window,
                                 &g.global_mask_lo,
                                 &g.global_mask_hi,
                                 &g.qkv_conv_taps,
                                 &g.engram_slots,
                                 &g.engram_sub_dim,
                                 &g.num_engram_tables,
                                 &g.engram_conv_taps,
                                 &g.engram_conv_dilation,
                                 &g.engram_seed_heads,
                                 &g.num_engram_orders};
  for (int i = 0; i < 4; ++i) w[kEngramOrders + i] = &g.engram_orders[i];
  w[kNumEngramSites] = &g.num_engram_sites;
  for (int i = 0; i < 16; ++i) w[kEngramSites + i] = &g.engram_sites[i];
  return w;
}

// Bounds every single size so that all products below stay far from overflow.
constexpr uint32_t kMaxDim = 1u << 24;

uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

struct Checker {
  const std::string& file;
  absl::Status status = absl::OkStatus();
  bool Check(bool ok, int index, const std::string& what) {
    if (!ok && status.ok())
      status =
          FormatError(file, "header." + Header3FieldName(index), Header3FieldOffset(index), what);
    return ok && status.ok();
  }
  bool Range(uint32_t v, uint32_t lo, uint32_t hi, int index) {
    return Check(v >= lo && v <= hi, index,
                 absl::StrFormat("%d is outside the allowed range [%d, %d]", v, lo, hi));
  }
};

void CheckAttention(const Geometry3& g, Checker& c) {
  c.Range(g.num_heads, 1, 4096, kNumHeads);
  if (c.Range(g.num_kv_heads, 1, 4096, kNumKvHeads))
    c.Check(g.num_heads % g.num_kv_heads == 0, kNumKvHeads,
            absl::StrFormat("%d does not divide num_heads %d", g.num_kv_heads, g.num_heads));
  c.Range(g.num_layers, 1, kMaxLayers3, kNumLayers);
  if (c.Range(g.qk_head_dim, 2, 4096, kQkHeadDim))
    c.Check(g.qk_head_dim % 2 == 0, kQkHeadDim,
            absl::StrFormat("%d is odd (RoPE rotates the two halves of a query/key head)",
                            g.qk_head_dim));
  c.Range(g.v_head_dim, 1, 4096, kVHeadDim);
  for (auto [dim, index, name] : {std::tuple{g.qk_head_dim, kQkHeadDim, "qk_head_dim"},
                                  {g.v_head_dim, kVHeadDim, "v_head_dim"}})
    if (c.status.ok())
      c.Check(uint64_t(g.num_heads) * dim <= (1u << 16), index,
              absl::StrFormat("num_heads %d x %s %d is larger than 65536", g.num_heads, name, dim));
  c.Range(g.max_seq_len, 1, kMaxDim, kMaxSeqLen);
  c.Range(g.sliding_window, 0, kMaxDim, kSlidingWindow);
  // Bits at or above num_layers name layers that do not exist.
  if (c.status.ok()) {
    const uint64_t mask = g.global_mask();
    for (uint32_t bit = g.num_layers; bit < 64; ++bit)
      if (!c.Check(!(mask >> bit & 1), bit < 32 ? kGlobalMaskLo : kGlobalMaskHi,
                   absl::StrFormat("bit %d (layer %d) is set but num_layers is %d", bit, bit,
                                   g.num_layers)))
        break;
  }
  c.Range(g.qkv_conv_taps, 0, 64, kQkvConvTaps);
}

void CheckEngram(const Geometry3& g, Checker& c) {
  c.Range(g.engram_slots, 1, kMaxDim, kEngramSlots);
  c.Range(g.num_engram_tables, 1, 4096, kNumEngramTables);
  if (c.Range(g.engram_sub_dim, 1, 1u << 16, kEngramSubDim))
    c.Check(g.engram_sub_dim == g.d_model / g.num_engram_tables, kEngramSubDim,
            absl::StrFormat("%d but d_model %d / num_engram_tables %d is %d", g.engram_sub_dim,
                            g.d_model, g.num_engram_tables, g.d_model / g.num_engram_tables));
  if (c.status.ok())
    c.Check(uint64_t(g.num_engram_tables) * g.engram_slots <= UINT32_MAX, kEngramSlots,
            absl::StrFormat("num_engram_tables %d x engram_slots %d rows do not fit a u32 shape",
                            g.num_engram_tables, g.engram_slots));
  c.Range(g.engram_conv_taps, 1, 64, kEngramConvTaps);
  c.Range(g.num_engram_orders, 1, 4, kNumEngramOrders);
  uint32_t max_order = 0;
  for (uint32_t i = 0; i < 4 && c.status.ok(); ++i) {
    const uint32_t o = g.engram_orders[i];
    if (i < g.num_engram_orders) {
      c.Range(o, 1, 64, kEngramOrders + int(i));
      max_order = std::max(max_order, o);
    } else {
      c.Check(
          o == 0, kEngramOrders + int(i),
          absl::StrFormat("%d beyond num_engram_orders %d (must be 0)", o, g.num_engram_orders));
    }
  }
  if (c.status.ok())
    c.Check(g.num_engram_tables % g.num_engram_orders == 0, kNumEngramTables,
            absl::StrFormat("%d is not num_engram_orders %d x heads per order", g.num_engram_tables,
                            g.num_engram_orders));
  if (c.status.ok())
    c.Check(g.engram_conv_dilation == max_order, kEngramConvDilation,
            absl::StrFormat("%d but the largest engram order is %d", g.engram_conv_dilation,
                            max_order));
  // A seed stride below the heads per order would give two orders the same hash seeds.
  const uint32_t per_order = g.num_engram_orders ? g.num_engram_tables / g.num_engram_orders : 0;
  if (c.status.ok())
    c.Check(g.engram_seed_heads == 0 ||
                (g.engram_seed_heads >= per_order && g.engram_seed_heads <= 4096),
            kEngramSeedHeads,
            absl::StrFormat("%d is neither 0 nor in [heads per order %d, 4096]",
                            g.engram_seed_heads, per_order));
  c.Range(g.num_engram_sites, 0, kMaxEngramSites3, kNumEngramSites);
  for (uint32_t i = 0; i < kMaxEngramSites3 && c.status.ok(); ++i) {
    const uint32_t s = g.engram_sites[i];
    const int index = kEngramSites + int(i);
    if (i >= g.num_engram_sites) {
      c.Check(s == 0, index,
              absl::StrFormat("%d beyond num_engram_sites %d (must be 0)", s, g.num_engram_sites));
    } else if (c.Check(s < g.num_layers, index,
                       absl::StrFormat("site %d at layer %d but num_layers is %d", i, s,
                                       g.num_layers)) &&
               i > 0) {
      c.Check(s > g.engram_sites[i - 1], index,
              absl::StrFormat("site %d at layer %d is not after site %d at layer %d", i, s, i - 1,
                              g.engram_sites[i - 1]));
    }
  }
}

}  // namespace

std::string Header3FieldName(int index) {
  if (index >= 0 && index < kEngramOrders) return kScalarNames[index];
  if (index >= kEngramOrders && index < kNumEngramSites)
    return absl::StrFormat("engram_orders[%d]", index - kEngramOrders);
  if (index == kNumEngramSites) return "num_engram_sites";
  if (index >= kEngramSites && index < kRopeTheta)
    return absl::StrFormat("engram_sites[%d]", index - kEngramSites);
  if (index == kRopeTheta) return "rope_theta";
  return "?";
}

Header3 ParseHeader3(const uint8_t* bytes) {
  Header3 h;
  auto words = Words(h);
  for (size_t i = 0; i < words.size(); ++i) *words[i] = LoadLE32(bytes + 4 * i);
  h.geometry.rope_theta = LoadLEF32(bytes + 4 * kRopeTheta);
  return h;
}

std::array<uint8_t, kHeader3Bytes> SerializeHeader3(const Header3& h) {
  Header3 copy = h;
  std::array<uint8_t, kHeader3Bytes> out{};
  auto words = Words(copy);
  for (size_t i = 0; i < words.size(); ++i) StoreLE32(out.data() + 4 * i, *words[i]);
  StoreLEF32(out.data() + 4 * kRopeTheta, h.geometry.rope_theta);
  return out;
}

absl::Status ValidateHeader3(const Header3& h, const std::string& file) {
  const Geometry3& g = h.geometry;
  Checker c{file};
  c.Check(h.tag == kCact3Tag, kTag,
          absl::StrFormat("0x%08X is not the Needle 3 tag 0x%08X", h.tag, kCact3Tag));
  c.Check(h.codebook_len == 28, kCodebookLen,
          absl::StrFormat("%d but the CQ2|CQ3|CQ4 codebooks need 4+8+16 = 28", h.codebook_len));
  c.Check(g.kv_bits == 2 || g.kv_bits == 3 || g.kv_bits == 4 || g.kv_bits == 8, kKvBits,
          absl::StrFormat("%d is not one of 2, 3, 4, 8", g.kv_bits));
  c.Range(g.vocab, 1, kMaxDim, kVocab);
  c.Range(g.out_vocab, 0, g.vocab, kOutVocab);
  c.Range(g.d_model, 1, 1u << 16, kDModel);
  CheckAttention(g, c);
  if (c.status.ok())
    c.Check(g.hada_n == NextPow2(g.d_model), kHadaN,
            absl::StrFormat("%d but the smallest power of two >= d_model %d is %d", g.hada_n,
                            g.d_model, NextPow2(g.d_model)));
  c.Range(g.mhc_lanes, 1, 64, kMhcLanes);
  CheckEngram(g, c);
  c.Check(std::isfinite(g.rope_theta) && g.rope_theta > 0, kRopeTheta,
          absl::StrFormat("%g is not a finite positive number", g.rope_theta));
  return c.status;
}

uint64_t FirstBlobOffset3(uint32_t codebook_len, uint32_t num_tensors) {
  return AlignUp(kHeader3Bytes + 4ull * codebook_len + kRecordBytes * uint64_t(num_tensors),
                 kBlobAlign);
}

}  // namespace cact
