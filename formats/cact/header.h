// The fixed parts of a .cact file: 120-byte header, codebook, 44-byte directory records.
// See docs/format.md and ../shared/docs/cact-spec.md section 1.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

inline constexpr uint32_t kCactTag = 0x05E12A83;
inline constexpr size_t kHeaderBytes = 120;  // struct '<29If'
inline constexpr size_t kRecordBytes = 44;   // struct '<BBHIIIIQQII'
inline constexpr size_t kBlobAlign = 64;
inline constexpr uint32_t kTernaryBits = 5;  // record `bits` value meaning ternary (1.58)

enum class DType : uint8_t { kFP16 = 1, kFP32 = 2, kCQ = 3, kRAW = 4 };
const char* DTypeName(DType d);  // "FP16", "FP32", "CQ", "RAW"

// The CQ types, one row per record `bits` value (spec section 1: Codebook, CQ blob).
struct CqType {
  uint32_t bits;        // the record's `bits` field
  uint32_t code_bits;   // width of one packed code (ternary: 2-bit crumbs 3, 0, 1)
  const char* width;    // "2", "3", "4", "1.58"
  const char* name;     // "CQ2", "CQ3", "CQ4", "CQ1.58"
  uint32_t levels;      // codebook entries
  int codebook_offset;  // first value in the file's CQ2 | CQ3 | CQ4 codebook; -1: not stored
};
inline constexpr CqType kCqTypes[] = {
    {2, 2, "2", "CQ2", 4, 0},
    {3, 3, "3", "CQ3", 8, 4},
    {4, 4, "4", "CQ4", 16, 12},
    {kTernaryBits, 2, "1.58", "CQ1.58", 3, -1},
};
// The row for record `bits`, nullptr when `bits` is not a CQ width.
constexpr const CqType* FindCqType(uint32_t bits) {
  for (const CqType& t : kCqTypes)
    if (t.bits == bits) return &t;
  return nullptr;
}
// The row whose width is `width` ("2", "3", "4", "1.58"), nullptr for any other text.
constexpr const CqType* FindCqTypeByWidth(std::string_view width) {
  for (const CqType& t : kCqTypes)
    if (width == t.width) return &t;
  return nullptr;
}
// Code width for record `bits` (an unknown value is taken as its own width).
constexpr uint32_t CqCodeBits(uint32_t bits) {
  const CqType* t = FindCqType(bits);
  return t ? t->code_bits : bits;
}
// The ternary codebook is analytic: float32({-l, 0, +l} / sqrt(group)) with this l.
inline constexpr double kTernaryLevel = 1.2240064;
// Unit-variance Lloyd-Max CQ2 levels in float64 (quant/codebook.h computes them; its tests
// check these): the stored CQ2 codebook is float32(level / sqrt(group)).
inline constexpr double kUnitCq2Levels[4] = {-0x1.81b52e4028034p+0, -0x1.ce467275b97c1p-2,
                                             0x1.cfd177c54d348p-2, 0x1.828af1c85664p+0};
// float32(unit / sqrt(group)), rounded once: how every codebook value is scaled.
float ScaleUnitLevel(double unit, uint32_t group);

// The CQ group rule: a power of two in [8, 65536].
inline constexpr uint32_t kMinCqGroup = 8, kMaxCqGroup = 1u << 16;
constexpr bool IsValidCqGroup(uint64_t group) {
  return group >= kMinCqGroup && group <= kMaxCqGroup && (group & (group - 1)) == 0;
}

// "2", "3", "4" or "1.58" for record bits (other values: the number).
std::string WidthName(uint32_t record_bits);
// "CQ2", "CQ1.58" for record bits (other values: "CQ" and the number).
std::string CqTypeName(uint32_t record_bits);
// The group a stored CQ2 codebook (4 values) was scaled for: the valid group whose
// float32(kUnitCq2Levels / sqrt(group)) equals all four values bit for bit, else 0.
uint32_t InferCodebookGroup(const float* cq2_values);

// The model geometry: everything in the header except the tag, tensor count and
// codebook length. Field names follow the spec table.
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

  // Derived sizes.
  uint32_t attn_dim() const { return num_heads * head_dim; }   // A
  uint32_t kv_dim() const { return num_kv_heads * head_dim; }  // K
  uint32_t heads_per_order() const {
    return num_engram_orders ? num_engram_tables / num_engram_orders : 0;
  }
  // Returns the engram site index whose layer is `layer`, or -1.
  int EngramSiteAt(uint32_t layer) const;

  // The released Needle 2 geometry (spec table).
  static Geometry Needle2();
};

struct Header {
  uint32_t tag = kCactTag;
  uint32_t num_tensors = 0;
  uint32_t codebook_len = 28;
  Geometry geometry;
};

// Little-endian struct '<29If'. Parse checks only that 120 bytes are there; semantic
// validation lives in ValidateHeader (names the field and its byte offset).
Header ParseHeader(const uint8_t* bytes120);
std::array<uint8_t, kHeaderBytes> SerializeHeader(const Header& h);
absl::Status ValidateHeader(const Header& h, const std::string& file);
// Byte offset of header field `index` (0..29), for error messages.
inline constexpr uint64_t HeaderFieldOffset(int index) { return uint64_t(index) * 4; }

struct TensorRecord {
  DType dtype = DType::kFP16;
  uint8_t ndim = 0;
  uint16_t pad = 0;
  std::array<uint32_t, 4> shape = {0, 0, 0, 0};
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint32_t group = 0;
  uint32_t bits = 0;  // 2, 3, 4 or 5 (= ternary) for CQ; 0 otherwise

  uint64_t NumElements() const;  // product of the first ndim dims (0 for RAW)
};

// A record's type: "CQ2 g128", "CQ1.58 g128", "FP16", "FP32", "RAW" ("?" for a bad dtype).
std::string TypeLabel(const TensorRecord& r);

TensorRecord ParseRecord(const uint8_t* bytes44);
std::array<uint8_t, kRecordBytes> SerializeRecord(const TensorRecord& r);

// Bytes a CQ blob must have for a logical [out, in] matrix: packed codes then FP16 norms.
// Returns 0 and sets *overflow on 64-bit overflow.
uint64_t CqBlobBytes(uint64_t out, uint64_t in, uint32_t group, uint32_t bits,
                     bool* overflow = nullptr);
// Number of bytes of packed codes per row (in_pad * code_bits / 8; ternary uses 2 bits).
uint64_t CqRowCodeBytes(uint64_t in, uint32_t group, uint32_t bits);

inline uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
// Offset of the first blob: align64(120 + 4*codebook_len + 44*num_tensors).
uint64_t FirstBlobOffset(uint32_t codebook_len, uint32_t num_tensors);

}  // namespace cact
