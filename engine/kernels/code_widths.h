// The code widths the CQ kernels run, one row each: what the kernels know about a width.
// A width is the bits of one packed code; the format's CQ type table
// (formats/cact/cq_types.h) maps a record's `bits` to it (ternary codes are 2-bit crumbs).
// Each ISA's entries for a width sit at the row's index in its table (kernel_table.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cact::kernels {

// Which permuted activation layouts a batch builds (the natural order is always built).
inline constexpr uint32_t kLayoutPerm2 = 1, kLayoutPerm4 = 2, kAllLayouts = 3;

struct CodeWidth {
  uint32_t code_bits;  // bits of one packed code
  uint32_t layout;     // the permuted activation layout its SIMD kernels read (0: natural)
  // Code k of a packed row as stored (LSB-first bitstream): the scalar oracle's reading.
  uint32_t (*code_at)(const uint8_t* row, uint32_t k);
  // Codebook entries (int8 values) its codes index.
  constexpr uint32_t levels() const { return 1u << code_bits; }
  // Bytes of packed codes in a row of in_pad (a multiple of the group) values.
  constexpr uint64_t RowBytes(uint64_t in_pad) const { return in_pad * code_bits / 8; }
};

namespace code_at {
inline uint32_t Bits2(const uint8_t* row, uint32_t k) {
  return (row[k >> 2] >> (2 * (k & 3))) & 3u;
}
inline uint32_t Bits4(const uint8_t* row, uint32_t k) {
  return (row[k >> 1] >> (4 * (k & 1))) & 15u;
}
inline uint32_t Bits3(const uint8_t* row, uint32_t k) {  // may straddle two bytes
  const uint32_t bit = 3 * k, byte = bit >> 3, shift = bit & 7;
  uint32_t v = row[byte];
  if (shift > 5) v |= uint32_t(row[byte + 1]) << 8;
  return (v >> shift) & 7u;
}
}  // namespace code_at

inline constexpr CodeWidth kCodeWidths[] = {
    {2, kLayoutPerm2, code_at::Bits2},
    {3, 0, code_at::Bits3},
    {4, kLayoutPerm4, code_at::Bits4},
};
inline constexpr size_t kNumCodeWidths = sizeof kCodeWidths / sizeof kCodeWidths[0];

// The row's index for `code_bits`; kNumCodeWidths when the kernels have no such width.
constexpr size_t CodeWidthIndex(uint32_t code_bits) {
  for (size_t i = 0; i < kNumCodeWidths; ++i)
    if (kCodeWidths[i].code_bits == code_bits) return i;
  return kNumCodeWidths;
}
// The row for `code_bits`, nullptr when the kernels have no such width.
constexpr const CodeWidth* FindCodeWidth(uint32_t code_bits) {
  const size_t i = CodeWidthIndex(code_bits);
  return i < kNumCodeWidths ? &kCodeWidths[i] : nullptr;
}

}  // namespace cact::kernels
