// The CQ types of a .cact file, one row per record `bits` value: everything the format
// says about a CQ width (spec section 1: Codebook, CQ blob). The engine turns a row into
// the kernels' code width (engine/kernels/code_widths.h) and int8 codebook.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cact {

inline constexpr uint32_t kTernaryBits = 5;  // record `bits` value meaning ternary (1.58)

// Bytes of one packed row (LSB-first bitstream): `in` values padded to whole groups,
// code_bits each; 0 for group 0.
constexpr uint64_t PackedRowBytes(uint64_t in, uint32_t group, uint32_t code_bits) {
  if (group == 0) return 0;
  const uint64_t groups = in / group + (in % group != 0);
  return groups * group * code_bits / 8;
}

struct CqType {
  uint32_t bits;        // the record's `bits` field
  uint32_t code_bits;   // width of one packed code (ternary: 2-bit crumbs 3, 0, 1)
  const char* width;    // "2", "3", "4", "1.58"
  const char* name;     // "CQ2", "CQ3", "CQ4", "CQ1.58"
  uint32_t levels;      // codebook entries
  int codebook_offset;  // first value in the file's CQ2 | CQ3 | CQ4 codebook; -1: not stored
  bool ternary;         // codebook {-l, 0, +l}: its int8 form {-1, 0, +1} is exact

  // Bytes of packed codes in one row of `in` values (PackedRowBytes).
  constexpr uint64_t RowBytes(uint64_t in, uint32_t group) const;
  // The code stored for codebook entry `index`, and back. Ternary stores trits -1, 0, +1
  // (entries 0, 1, 2) as crumbs 3, 0, 1, so a crumb read as a signed 2-bit number is the
  // trit; crumb 2 is no trit and reads as entry 3, past the codebook.
  constexpr uint32_t StoredCode(uint32_t index) const { return ternary ? (index + 3) & 3 : index; }
  constexpr uint32_t CodebookIndex(uint32_t stored) const {
    return ternary ? (stored + 1) & 3 : stored;
  }
};
constexpr uint64_t CqType::RowBytes(uint64_t in, uint32_t group) const {
  return PackedRowBytes(in, group, code_bits);
}

inline constexpr CqType kCqTypes[] = {
    {2, 2, "2", "CQ2", 4, 0, false},
    {3, 3, "3", "CQ3", 8, 4, false},
    {4, 4, "4", "CQ4", 16, 12, false},
    {kTernaryBits, 2, "1.58", "CQ1.58", 3, -1, true},
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
// "2", "3", "4" or "1.58" for record bits (other values: the number).
std::string WidthName(uint32_t record_bits);
// "CQ2", "CQ1.58" for record bits (other values: "CQ" and the number).
std::string CqTypeName(uint32_t record_bits);

// The ternary codebook is analytic: float32({-l, 0, +l} / sqrt(group)) with this l.
inline constexpr double kTernaryLevel = 1.2240064;
// Unit-variance Lloyd-Max CQ2 levels in float64 (quant/cq/codebook.h computes them; its tests
// check these): the stored CQ2 codebook is float32(level / sqrt(group)).
inline constexpr double kUnitCq2Levels[4] = {-0x1.81b52e4028034p+0, -0x1.ce467275b97c1p-2,
                                             0x1.cfd177c54d348p-2, 0x1.828af1c85664p+0};
// float32(unit / sqrt(group)), rounded once: how every codebook value is scaled.
float ScaleUnitLevel(double unit, uint32_t group);
// The group a stored CQ2 codebook (4 values) was scaled for: the valid group whose
// float32(kUnitCq2Levels / sqrt(group)) equals all four values bit for bit, else 0.
uint32_t InferCodebookGroup(const float* cq2_values);

// The CQ group rule: a power of two in [8, 65536].
inline constexpr uint32_t kMinCqGroup = 8, kMaxCqGroup = 1u << 16;
constexpr bool IsValidCqGroup(uint64_t group) {
  return group >= kMinCqGroup && group <= kMaxCqGroup && (group & (group - 1)) == 0;
}

}  // namespace cact
