// CQ ("Cactus Quants") matrices: per row, groups of `group` weights rotated by the
// orthonormal Hadamard, normalised, scalar-quantized against a codebook; one FP16 norm per
// group. Blob layout: all rows' packed codes (LSB-first bitstream per row), then all norms.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace cact {

struct CqShape {
  uint32_t out = 0, in = 0, group = 128, bits = 2;  // bits 2/3/4 or 5 (= ternary)
  uint32_t in_pad() const { return (in + group - 1) / group * group; }
  uint32_t groups() const { return in_pad() / group; }
  uint32_t code_bits() const { return bits == 5 ? 2 : bits; }
  uint64_t row_code_bytes() const { return uint64_t(in_pad()) * code_bits() / 8; }
  uint64_t code_bytes() const { return row_code_bytes() * out; }
  uint64_t norm_bytes() const { return uint64_t(out) * groups() * 2; }
  uint64_t blob_bytes() const { return code_bytes() + norm_bytes(); }
};

// Codes are codebook indices 0..2^bits-1 (ternary: trit index 0,1,2 for -1,0,+1).
// Packing for bits 2/3/4 is the LSB-first bitstream; ternary crumbs are 3,0,1 for 0,1,2.
void PackRow(const uint8_t* codes, uint32_t n, uint32_t bits, uint8_t* out);
void UnpackRow(const uint8_t* packed, uint32_t n, uint32_t bits, uint8_t* codes);

struct CqMatrix {
  CqShape shape;
  std::vector<uint8_t> codes;   // out * in_pad indices (unpacked)
  std::vector<uint16_t> norms;  // out * groups FP16 bits
};

// Quantize a row-major [out, in] float matrix (spec: w @ H via FWHT, unrounded norm for the
// unit vector, ties to the smaller index, FP16 norm). `codebook` has 2^bits (3 ternary) entries.
// Parallel over rows with OpenMP.
CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook);
std::vector<uint8_t> PackBlob(const CqMatrix& m);
// Parses a blob (caller checked its size with CqShape::blob_bytes()).
CqMatrix UnpackBlob(std::span<const uint8_t> blob, const CqShape& shape);
// Dequantize straight from a blob into row-major [out, in] float32.
void DequantizeBlob(std::span<const uint8_t> blob, const CqShape& shape,
                    std::span<const float> codebook, float* out);
// Dequantize a single row (engine: embedding/engram rows on demand).
void DequantizeRow(std::span<const uint8_t> blob, const CqShape& shape,
                   std::span<const float> codebook, uint32_t row, float* out);

}  // namespace cact
