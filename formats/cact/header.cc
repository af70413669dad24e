#include "formats/cact/header.h"

#include <algorithm>
#include <cmath>

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

namespace {

// Upper bound for any single dimension: keeps every derived product far from overflow
// and rejects absurd headers before anything is sized from them.
constexpr uint32_t kMaxDim = 1u << 24;

struct HeaderChecker {
  const std::string& file;
  absl::Status status = absl::OkStatus();
  // Field `name` at header index `index` must satisfy `ok`; otherwise record the error.
  bool Check(bool ok, int index, const char* name, const std::string& what) {
    if (!ok && status.ok())
      status = FormatError(file, std::string("header.") + name, HeaderFieldOffset(index), what);
    return ok;
  }
  bool Range(uint32_t v, uint32_t lo, uint32_t hi, int index, const char* name) {
    return Check(v >= lo && v <= hi, index, name,
                 absl::StrFormat("%d is outside the allowed range [%d, %d]", v, lo, hi));
  }
};

uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

absl::Status ValidateHeader(const Header& h, const std::string& file) {
  const Geometry& g = h.geometry;
  HeaderChecker c{file};
  c.Check(h.tag == kCactTag, 0, "tag",
          absl::StrFormat("0x%08X is not the .cact tag 0x%08X", h.tag, kCactTag));
  c.Check(h.codebook_len == 28, 2, "codebook_len",
          absl::StrFormat("%d but the CQ2|CQ3|CQ4 codebooks need 4+8+16 = 28", h.codebook_len));
  c.Check(g.kv_bits == 2 || g.kv_bits == 3 || g.kv_bits == 4 || g.kv_bits == 8, 4, "kv_bits",
          absl::StrFormat("%d is not one of 2, 3, 4, 8", g.kv_bits));
  c.Range(g.vocab, 1, kMaxDim, 5, "vocab");
  c.Range(g.d_model, 1, 1u << 16, 6, "d_model");
  c.Range(g.num_heads, 1, 4096, 7, "num_heads");
  c.Range(g.num_kv_heads, 1, 4096, 8, "num_kv_heads");
  if (c.status.ok())
    c.Check(g.num_heads % g.num_kv_heads == 0, 8, "num_kv_heads",
            absl::StrFormat("%d does not divide num_heads %d", g.num_kv_heads, g.num_heads));
  c.Range(g.num_layers, 1, 1000, 9, "num_layers");
  c.Range(g.head_dim, 2, 4096, 10, "head_dim");
  c.Check(g.head_dim % 2 == 0, 10, "head_dim",
          absl::StrFormat("%d is odd (RoPE pairs dim i with i + head_dim/2)", g.head_dim));
  if (c.status.ok())
    c.Check(uint64_t(g.num_heads) * g.head_dim <= (1u << 16), 10, "head_dim",
            absl::StrFormat("num_heads %d x head_dim %d is larger than 65536", g.num_heads,
                            g.head_dim));
  c.Range(g.max_seq_len, 1, kMaxDim, 11, "max_seq_len");
  if (c.status.ok())
    c.Check(g.hada_n == NextPow2(g.d_model), 12, "hada_n",
            absl::StrFormat("%d but the smallest power of two >= d_model %d is %d", g.hada_n,
                            g.d_model, NextPow2(g.d_model)));
  c.Range(g.mhc_lanes, 1, 64, 13, "mhc_lanes");
  c.Range(g.engram_slots, 1, kMaxDim, 14, "engram_slots");
  c.Range(g.engram_sub_dim, 1, 1u << 16, 15, "engram_sub_dim");
  c.Range(g.num_engram_tables, 1, 4096, 16, "num_engram_tables");
  if (c.status.ok())
    c.Check(uint64_t(g.num_engram_tables) * g.engram_sub_dim == g.d_model, 16, "num_engram_tables",
            absl::StrFormat("%d tables x engram_sub_dim %d = %d, not d_model %d",
                            g.num_engram_tables, g.engram_sub_dim,
                            uint64_t(g.num_engram_tables) * g.engram_sub_dim, g.d_model));
  if (c.status.ok())
    c.Check(uint64_t(g.num_engram_tables) * g.engram_slots <= UINT32_MAX, 14, "engram_slots",
            absl::StrFormat("num_engram_tables %d x engram_slots %d rows do not fit a u32 shape",
                            g.num_engram_tables, g.engram_slots));
  c.Range(g.engram_conv_taps, 1, 64, 17, "engram_conv_taps");
  c.Range(g.num_engram_orders, 1, 4, 19, "num_engram_orders");
  uint32_t max_order = 0;
  for (uint32_t i = 0; i < 4 && c.status.ok(); ++i) {
    uint32_t o = g.engram_orders[i];
    const int index = 20 + int(i);
    if (i < g.num_engram_orders) {
      c.Range(o, 1, 64, index, "engram_orders");
      max_order = std::max(max_order, o);
    } else {
      c.Check(o == 0, index, "engram_orders",
              absl::StrFormat("entry %d is %d beyond num_engram_orders %d (must be 0)", i, o,
                              g.num_engram_orders));
    }
  }
  if (c.status.ok())
    c.Check(g.num_engram_tables % g.num_engram_orders == 0, 16, "num_engram_tables",
            absl::StrFormat("%d is not num_engram_orders %d x heads_per_order", g.num_engram_tables,
                            g.num_engram_orders));
  if (c.status.ok())
    c.Check(g.engram_conv_dilation == max_order, 18, "engram_conv_dilation",
            absl::StrFormat("%d but the largest engram order is %d", g.engram_conv_dilation,
                            max_order));
  c.Range(g.num_engram_sites, 0, 4, 24, "num_engram_sites");
  for (uint32_t i = 0; i < 4 && c.status.ok(); ++i) {
    uint32_t s = g.engram_sites[i];
    const int index = 25 + int(i);
    if (i < g.num_engram_sites) {
      c.Check(s < g.num_layers, index, "engram_sites",
              absl::StrFormat("site %d at layer %d but num_layers is %d", i, s, g.num_layers));
      if (i > 0)
        c.Check(s > g.engram_sites[i - 1], index, "engram_sites",
                absl::StrFormat("site %d at layer %d is not after site %d at layer %d", i, s, i - 1,
                                g.engram_sites[i - 1]));
    } else {
      c.Check(s == 0, index, "engram_sites",
              absl::StrFormat("entry %d is %d beyond num_engram_sites %d (must be 0)", i, s,
                              g.num_engram_sites));
    }
  }
  c.Check(std::isfinite(g.rope_theta) && g.rope_theta > 0, 29, "rope_theta",
          absl::StrFormat("%g is not a finite positive number", g.rope_theta));
  return c.status;
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
