// CQ ("Cactus Quants") matrices: per row, groups of `group` weights rotated by the
// orthonormal Hadamard, normalised, scalar-quantized against a codebook; one FP16 norm per
// group. Blob layout: all rows' packed codes (LSB-first bitstream per row), then all norms.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "formats/cact/header.h"  // the CQ type table (cq_types.h)

namespace cact {

struct CqShape {
  uint32_t out = 0, in = 0, group = 128, bits = 2;  // bits 2/3/4 or 5 (= ternary)
  uint32_t in_pad() const { return (in + group - 1) / group * group; }
  uint32_t groups() const { return in_pad() / group; }
  uint32_t code_bits() const { return CqCodeBits(bits); }
  uint64_t row_code_bytes() const { return PackedRowBytes(in, group, code_bits()); }
  uint64_t code_bytes() const { return row_code_bytes() * out; }
  uint64_t norm_bytes() const { return uint64_t(out) * groups() * 2; }
  uint64_t blob_bytes() const { return code_bytes() + norm_bytes(); }
};

// Codes are codebook indices 0..2^bits-1 (ternary: trit index 0,1,2 for -1,0,+1).
// Packing is the LSB-first bitstream of CqType::StoredCode (ternary: crumbs 3,0,1 for 0,1,2).
void PackRow(const uint8_t* codes, uint32_t n, uint32_t bits, uint8_t* out);
void UnpackRow(const uint8_t* packed, uint32_t n, uint32_t bits, uint8_t* codes);
// Unpacks n codes starting at code index `first` of a packed row (reads only those bits' bytes).
void UnpackCodes(const uint8_t* packed_row, uint64_t first, uint32_t n, uint32_t bits,
                 uint8_t* codes);

struct CqMatrix {
  CqShape shape;
  std::vector<uint8_t> codes;   // out * in_pad indices (unpacked)
  std::vector<uint16_t> norms;  // out * groups FP16 bits
  // Filled by QuantizeMatrix: sum of squared reconstruction errors (rotated domain, FP16
  // norms, double) and sum of squared inputs; error_sq / signal_sq is the relative MSE.
  double error_sq = 0, signal_sq = 0;
  double rel_mse() const { return signal_sq > 0 ? error_sq / signal_sq : 0.0; }
};

// How the group rotation `x @ H` is evaluated. Both are float32 and differ only in
// rounding order:
//  - kFwht: the fast Walsh-Hadamard butterflies, then one multiply by HadamardScale(g);
//    O(log g) per value.
//  - kExporter: the order of the official exporter/reader, whose numpy matmul runs on the
//    reference BLAS (Debian libblas3): y_k = ((0 + x_0*h_0k) + x_1*h_1k) + ... , a plain
//    left-to-right sum of rounded products; O(g) per value. Bit-identical with the
//    official files and official_dequant/*.npy.
enum class CqRotation { kFwht, kExporter };

// Quantize a row-major [out, in] float matrix (spec: w @ H, unrounded norm for the unit
// vector, searchsorted + "<=" for the nearest entry (ties to the smaller index), FP16 norm).
// `codebook` has 2^bits (3 ternary) entries, sorted. OpenMP over groups of rows. The default
// rotation is the FWHT, which reproduces the fixtures byte for byte; kExporter also removes
// the rare near-tie flips the FWHT's rounding can cause on large models.
CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook);
CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook,
                        CqRotation rotation);
std::vector<uint8_t> PackBlob(const CqMatrix& m);
// Parses a blob (caller checked its size with CqShape::blob_bytes()).
CqMatrix UnpackBlob(std::span<const uint8_t> blob, const CqShape& shape);
// Dequantize straight from a blob into row-major [out, in] float32, bit-identical to the
// official reader (numpy `(cb[idx] * norm) @ H`, CqRotation::kExporter). OpenMP over rows.
void DequantizeBlob(std::span<const uint8_t> blob, const CqShape& shape,
                    std::span<const float> codebook, float* out);
// Dequantize a single row (engine: embedding/engram rows on demand), same numerics.
void DequantizeRow(std::span<const uint8_t> blob, const CqShape& shape,
                   std::span<const float> codebook, uint32_t row, float* out);
// The same through the FWHT: O(log group) per value, equal to the above within a few
// float32 ulps of the tensor's largest values (about 1e-6 of max |value|), not bit-exact.
void DequantizeBlobFwht(std::span<const uint8_t> blob, const CqShape& shape,
                        std::span<const float> codebook, float* out);
void DequantizeRowFwht(std::span<const uint8_t> blob, const CqShape& shape,
                       std::span<const float> codebook, uint32_t row, float* out);

}  // namespace cact
