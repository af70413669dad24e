#include "formats/cact/header3.h"

#include <type_traits>
#include <vector>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/cact/header_checks.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

namespace {

// Word indices of '<48If' (byte offset = 4 * index), in the order of ForEachGeometry3Field
// after the tag, the tensor count and the codebook length.
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
  kRopeTheta = kEngramSites + kMaxEngramSites3,
};
static_assert(kRopeTheta == 48 && kRopeTheta * 4 + 4 == kHeader3Bytes);

// Calls fn(name, word) for the 48 u32 words in header order ("engram_sites[3]" for array
// entries); rope_theta, the float after them, is not among them.
template <typename H, typename Fn>
void ForEachWord(H& h, Fn&& fn) {
  fn(std::string("tag"), h.tag);
  fn(std::string("num_tensors"), h.num_tensors);
  fn(std::string("codebook_len"), h.codebook_len);
  ForEachGeometry3Field(h.geometry, [&](const char* name, auto& field) {
    using T = std::remove_cvref_t<decltype(field)>;
    if constexpr (std::is_same_v<T, uint32_t>) {
      fn(std::string(name), field);
    } else if constexpr (!std::is_same_v<T, float>) {
      for (size_t i = 0; i < field.size(); ++i) fn(absl::StrFormat("%s[%d]", name, i), field[i]);
    }
  });
}

std::vector<std::string> FieldNames() {
  std::vector<std::string> names;
  const Header3 h;
  ForEachWord(h, [&](std::string name, const uint32_t&) { names.push_back(std::move(name)); });
  names.push_back("rope_theta");
  return names;
}

}  // namespace

std::string Header3FieldName(int index) {
  static const std::vector<std::string> names = FieldNames();
  return index >= 0 && size_t(index) < names.size() ? names[index] : "?";
}

Header3 ParseHeader3(const uint8_t* bytes) {
  Header3 h;
  int i = 0;
  ForEachWord(h, [&](const std::string&, uint32_t& w) { w = LoadLE32(bytes + 4 * i++); });
  h.geometry.rope_theta = LoadLEF32(bytes + 4 * kRopeTheta);
  return h;
}

std::array<uint8_t, kHeader3Bytes> SerializeHeader3(const Header3& h) {
  std::array<uint8_t, kHeader3Bytes> out{};
  int i = 0;
  ForEachWord(h,
              [&](const std::string&, const uint32_t& w) { StoreLE32(out.data() + 4 * i++, w); });
  StoreLEF32(out.data() + 4 * kRopeTheta, h.geometry.rope_theta);
  return out;
}

absl::Status ValidateHeader3(const Header3& h, const std::string& file) {
  const Geometry3& g = h.geometry;
  HeaderChecker c(file, Header3FieldName);
  c.Check(h.tag == kCact3Tag, kTag,
          absl::StrFormat("0x%08X is not the Needle 3 tag 0x%08X", h.tag, kCact3Tag));
  c.CodebookLen(h.codebook_len, kCodebookLen);
  c.KvBits(g.kv_bits, kKvBits);
  c.Range(g.vocab, 1, kMaxHeaderDim, kVocab);
  c.Range(g.out_vocab, 0, g.vocab, kOutVocab);  // 0: the whole vocabulary
  c.Range(g.d_model, 1, 1u << 16, kDModel);
  c.Heads(g.num_heads, kNumHeads, g.num_kv_heads, kNumKvHeads);
  c.Range(g.num_layers, 1, kMaxLayers3, kNumLayers);
  c.HeadWidth(g.num_heads, g.qk_head_dim, /*rotated=*/true, kQkHeadDim);
  c.HeadWidth(g.num_heads, g.v_head_dim, /*rotated=*/false, kVHeadDim);
  c.Range(g.max_seq_len, 1, kMaxHeaderDim, kMaxSeqLen);
  c.Range(g.sliding_window, 0, kMaxHeaderDim, kSlidingWindow);
  // Bits at or above num_layers name layers that do not exist.
  for (uint32_t bit = g.num_layers; bit < 64 && c.ok(); ++bit)
    c.Check(
        !(g.global_mask() >> bit & 1), bit < 32 ? kGlobalMaskLo : kGlobalMaskHi,
        absl::StrFormat("bit %d (layer %d) is set but num_layers is %d", bit, bit, g.num_layers));
  c.Range(g.qkv_conv_taps, 0, 64, kQkvConvTaps);
  c.HadaN(g.hada_n, g.d_model, kHadaN);
  c.Range(g.mhc_lanes, 1, 64, kMhcLanes);
  c.Range(g.engram_slots, 1, kMaxHeaderDim, kEngramSlots);
  c.Range(g.num_engram_tables, 1, 4096, kNumEngramTables);
  // The exporter computes engram_sub_dim = d_model // num_engram_tables.
  if (c.Range(g.engram_sub_dim, 1, 1u << 16, kEngramSubDim))
    c.Check(g.engram_sub_dim == g.d_model / g.num_engram_tables, kEngramSubDim,
            absl::StrFormat("%d but d_model %d / num_engram_tables %d is %d", g.engram_sub_dim,
                            g.d_model, g.num_engram_tables, g.d_model / g.num_engram_tables));
  c.TableRows(g.num_engram_tables, g.engram_slots, kEngramSlots);
  c.Range(g.engram_conv_taps, 1, 64, kEngramConvTaps);
  c.EngramOrders(g.num_engram_orders, g.engram_orders, kNumEngramOrders, kEngramOrders,
                 g.num_engram_tables, kNumEngramTables, g.engram_conv_dilation,
                 kEngramConvDilation);
  // A seed stride below the heads per order would give two orders the same hash seeds.
  if (c.ok()) {
    const uint32_t per_order = g.num_engram_tables / g.num_engram_orders;
    c.Check(g.engram_seed_heads == 0 ||
                (g.engram_seed_heads >= per_order && g.engram_seed_heads <= 4096),
            kEngramSeedHeads,
            absl::StrFormat("%d is neither 0 nor in [heads per order %d, 4096]",
                            g.engram_seed_heads, per_order));
  }
  c.EngramSites(g.num_engram_sites, g.engram_sites, g.num_layers, kNumEngramSites, kEngramSites);
  c.RopeTheta(g.rope_theta, kRopeTheta);
  return c.status();
}

uint64_t FirstBlobOffset3(uint32_t codebook_len, uint32_t num_tensors) {
  return AlignUp(kHeader3Bytes + 4ull * codebook_len + kRecordBytes * uint64_t(num_tensors),
                 kBlobAlign);
}

}  // namespace cact
