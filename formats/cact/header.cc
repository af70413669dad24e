#include "formats/cact/header.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "formats/cact/geometry_json.h"
#include "formats/cact/header_checks.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFP16:
      return "FP16";
    case DType::kFP32:
      return "FP32";
    case DType::kCQ:
      return "CQ";
    case DType::kRAW:
      return "RAW";
  }
  return "?";
}

std::string TypeLabel(const TensorRecord& r) {
  if (r.dtype != DType::kCQ) return DTypeName(r.dtype);
  return CqTypeName(r.bits) + " g" + std::to_string(r.group);
}

// Header words in '<29If' order; field i lives at byte 4*i.
static std::array<uint32_t*, 29> HeaderWords(Header& h) {
  Geometry& g = h.geometry;
  return {&h.tag,
          &h.num_tensors,
          &h.codebook_len,
          &g.kv_window,
          &g.kv_bits,
          &g.vocab,
          &g.d_model,
          &g.num_heads,
          &g.num_kv_heads,
          &g.num_layers,
          &g.head_dim,
          &g.max_seq_len,
          &g.hada_n,
          &g.mhc_lanes,
          &g.engram_slots,
          &g.engram_sub_dim,
          &g.num_engram_tables,
          &g.engram_conv_taps,
          &g.engram_conv_dilation,
          &g.num_engram_orders,
          &g.engram_orders[0],
          &g.engram_orders[1],
          &g.engram_orders[2],
          &g.engram_orders[3],
          &g.num_engram_sites,
          &g.engram_sites[0],
          &g.engram_sites[1],
          &g.engram_sites[2],
          &g.engram_sites[3]};
}

Header ParseHeader(const uint8_t* bytes120) {
  Header h;
  auto words = HeaderWords(h);
  for (size_t i = 0; i < words.size(); ++i) *words[i] = LoadLE32(bytes120 + 4 * i);
  h.geometry.rope_theta = LoadLEF32(bytes120 + 116);
  return h;
}

std::array<uint8_t, kHeaderBytes> SerializeHeader(const Header& h) {
  Header copy = h;
  std::array<uint8_t, kHeaderBytes> out{};
  auto words = HeaderWords(copy);
  for (size_t i = 0; i < words.size(); ++i) StoreLE32(out.data() + 4 * i, *words[i]);
  StoreLEF32(out.data() + 116, h.geometry.rope_theta);
  return out;
}

std::string HeaderFieldName(int index) {
  // Geometry fields in header order come from the JSON table (geometry_json.cc).
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"tag", "num_tensors", "codebook_len"};
    const nlohmann::ordered_json fields = GeometryToJson(Geometry{});  // alive while iterating
    for (const auto& [key, value] : fields.items()) {
      if (!value.is_array()) n.push_back(key);
      for (size_t i = 0; value.is_array() && i < value.size(); ++i)
        n.push_back(absl::StrFormat("%s[%d]", key, i));
    }
    return n;
  }();
  return index >= 0 && size_t(index) < names.size() ? names[index] : "?";
}

absl::Status ValidateHeader(const Header& h, const std::string& file) {
  const Geometry& g = h.geometry;
  HeaderChecker c(file, HeaderFieldName);
  c.Check(h.tag == kCactTag, 0,
          absl::StrFormat("0x%08X is not the .cact tag 0x%08X", h.tag, kCactTag));
  c.CodebookLen(h.codebook_len, 2);
  c.KvBits(g.kv_bits, 4);
  c.Range(g.vocab, 1, kMaxHeaderDim, 5);
  c.Range(g.d_model, 1, 1u << 16, 6);
  c.Heads(g.num_heads, 7, g.num_kv_heads, 8);
  c.Range(g.num_layers, 1, 1000, 9);
  c.HeadWidth(g.num_heads, g.head_dim, /*rotated=*/true, 10);
  c.Range(g.max_seq_len, 1, kMaxHeaderDim, 11);
  c.HadaN(g.hada_n, g.d_model, 12);
  c.Range(g.mhc_lanes, 1, 64, 13);
  c.Range(g.engram_slots, 1, kMaxHeaderDim, 14);
  c.Range(g.engram_sub_dim, 1, 1u << 16, 15);
  // Needle 2 splits d_model exactly among the tables.
  if (c.Range(g.num_engram_tables, 1, 4096, 16))
    c.Check(uint64_t(g.num_engram_tables) * g.engram_sub_dim == g.d_model, 16,
            absl::StrFormat("%d tables x engram_sub_dim %d = %d, not d_model %d",
                            g.num_engram_tables, g.engram_sub_dim,
                            uint64_t(g.num_engram_tables) * g.engram_sub_dim, g.d_model));
  c.TableRows(g.num_engram_tables, g.engram_slots, 14);
  c.Range(g.engram_conv_taps, 1, 64, 17);
  c.EngramOrders(g.num_engram_orders, g.engram_orders, 19, 20, g.num_engram_tables, 16,
                 g.engram_conv_dilation, 18);
  c.EngramSites(g.num_engram_sites, g.engram_sites, g.num_layers, 24, 25);
  c.RopeTheta(g.rope_theta, 29);
  return c.status();
}

uint64_t TensorRecord::NumElements() const {
  if (dtype == DType::kRAW || ndim == 0) return 0;
  uint64_t n = 1;
  for (int i = 0; i < ndim && i < 4; ++i) {
    if (__builtin_mul_overflow(n, uint64_t(shape[i]), &n)) return UINT64_MAX;
  }
  return n;
}

TensorRecord ParseRecord(const uint8_t* b) {
  TensorRecord r;
  r.dtype = DType(b[0]);
  r.ndim = b[1];
  r.pad = LoadLE16(b + 2);
  for (int i = 0; i < 4; ++i) r.shape[i] = LoadLE32(b + 4 + 4 * i);
  r.offset = LoadLE64(b + 20);
  r.nbytes = LoadLE64(b + 28);
  r.group = LoadLE32(b + 36);
  r.bits = LoadLE32(b + 40);
  return r;
}

std::array<uint8_t, kRecordBytes> SerializeRecord(const TensorRecord& r) {
  std::array<uint8_t, kRecordBytes> out{};
  out[0] = uint8_t(r.dtype);
  out[1] = r.ndim;
  StoreLE16(out.data() + 2, r.pad);
  for (int i = 0; i < 4; ++i) StoreLE32(out.data() + 4 + 4 * i, r.shape[i]);
  StoreLE64(out.data() + 20, r.offset);
  StoreLE64(out.data() + 28, r.nbytes);
  StoreLE32(out.data() + 36, r.group);
  StoreLE32(out.data() + 40, r.bits);
  return out;
}

uint64_t CqRowCodeBytes(uint64_t in, uint32_t group, uint32_t bits) {
  return PackedRowBytes(in, group, CqCodeBits(bits));
}

uint64_t CqBlobBytes(uint64_t out, uint64_t in, uint32_t group, uint32_t bits, bool* overflow) {
  bool of = (group == 0);
  const uint64_t groups = group ? in / group + (in % group != 0) : 0;
  uint64_t in_pad = 0, code_bits = 0, code_bytes = 0, norms = 0, norm_bytes = 0, total = 0;
  of = of || __builtin_mul_overflow(groups, uint64_t(group), &in_pad);
  of = of || __builtin_mul_overflow(in_pad, uint64_t(CqCodeBits(bits)), &code_bits);
  of = of || __builtin_mul_overflow(code_bits / 8, out, &code_bytes);
  of = of || __builtin_mul_overflow(out, groups, &norms);
  of = of || __builtin_mul_overflow(norms, uint64_t(2), &norm_bytes);
  of = of || __builtin_add_overflow(code_bytes, norm_bytes, &total);
  if (overflow) *overflow = of;
  return of ? 0 : total;
}

uint64_t FirstBlobOffset(uint32_t codebook_len, uint32_t num_tensors) {
  return AlignUp(kHeaderBytes + 4ull * codebook_len + kRecordBytes * uint64_t(num_tensors),
                 kBlobAlign);
}

}  // namespace cact
