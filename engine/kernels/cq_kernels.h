// CQ int8 kernels: products of CQ matrices (packed codes + FP16 group norms, straight from
// the file's blob) with activations, using the spec identity
//   dot(w_hat, x) = sum_groups norm * dot(cb[code], H x_group).
// Each activation group is rotated once with the FWHT and quantized to int8 (absmax/127);
// the codebook is mapped to int8; group dot products are exact int32.
//
// What is identical across ISAs (scalar, AVX2, AVX-VNNI, AVX-512 VNNI, AMX-INT8):
//  - PrepareActivations: bit-identical int8 values, scales and sums (same butterfly order,
//    same float operations, round-to-nearest-even).
//  - the int32 group dot products (exact integer arithmetic, tails and padding included);
//  - the float outputs, bit for bit: every kernel computes, per row, in group order,
//      acc = fma(float(norm[r,g]) * (act_scale[g] * (cb_scale / M)), float(D[r,g]), acc)
//    starting from acc = 0 (D and M: see GroupDots).
// MatVec and MatMat therefore also agree bit for bit (prefill == decode per matrix).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/code_widths.h"
#include "engine/kernels/isa.h"

namespace cact::kernels {

// ---------------------------------------------------------------- codebook
// The codebook mapped to int8: value(k) = int8[k] * scale. For 2^code_bits entries:
// int8 = round(c), c = cb * 127 / max|cb| (nearest, ties to even), scale = max|cb| / 127.
// Ternary (3 entries in 2-bit crumbs): int8 = {-1, 0, +1} exactly, scale = the ternary
// level (cb[2]). With `residual` (not ternary): lo = round((c - int8) * 128), so value(k) =
// (int8[k] + lo[k] / 128) * scale within scale / 256 (a 4-bit codebook is otherwise off by
// up to 0.5 / |int8| relative, ~0.4 % rms).
struct Int8Codebook {
  uint32_t code_bits = 2;  // width of the codes it decodes: 2, 3 or 4
  int8_t value[16] = {};   // indexed by the code as stored (ternary: by crumb 0..3)
  int8_t lo[16] = {};      // residual, when has_lo
  bool has_lo = false;
  float scale = 0.f;
};
// `cb` has 2^code_bits entries, or 3 entries {-l, 0, +l} for ternary (code_bits 2). The
// caller takes code_bits from the CQ type table (formats/cact/cq_types.h).
absl::StatusOr<Int8Codebook> MakeInt8Codebook(std::span<const float> cb, uint32_t code_bits,
                                              bool residual = false);

// ---------------------------------------------------------------- matrices
// A CQ matrix ready for the kernels: a view of the blob (not copied) plus a copy of the
// FP16 norms transposed into 16-row panels ([block][group][16 rows], zero for missing rows)
// so SIMD kernels load one group's norms for 16 rows with one instruction.
class CqKernelMatrix {
 public:
  // `blob` must hold exactly out * row_bytes codes then out * groups FP16 norms and outlive
  // this object. group: power of two 32..512; code_bits 2, 3 or 4 (the codebook's).
  static absl::StatusOr<CqKernelMatrix> Create(std::span<const uint8_t> blob, uint32_t out,
                                               uint32_t in, uint32_t group, uint32_t code_bits,
                                               const Int8Codebook& codebook);

  // Rows [begin, end) of a matrix.
  struct RowSlice {
    const CqKernelMatrix* matrix;
    uint32_t begin, end;
  };
  // A matrix whose rows are the slices' rows in order, read in place (the parts' blobs must
  // outlive it). The parts must agree on in, group, code bits and int8 codebook. The kernels give
  // each row exactly the part's result. Why: the kernels work on 16-row blocks, so a layer's
  // three small mHC projections (4, 4 and 16 rows) cost three blocks as separate products
  // and two blocks as one 24-row stack, which two threads also split evenly.
  static absl::StatusOr<CqKernelMatrix> Stack(std::span<const RowSlice> slices);

  uint32_t out() const { return out_; }
  uint32_t in() const { return in_; }
  uint32_t in_pad() const { return in_pad_; }
  uint32_t group() const { return group_; }
  uint32_t groups() const { return groups_; }
  uint32_t code_bits() const { return code_bits_; }
  // Its row in kCodeWidths (code_widths.h).
  size_t width_index() const { return width_index_; }
  const CodeWidth& width() const { return kCodeWidths[width_index_]; }
  uint64_t row_bytes() const { return row_bytes_; }
  // Row r's packed codes (row_bytes) and its FP16 LE norms (groups).
  const uint8_t* row_codes(uint32_t r) const {
    return row_codes_.empty() ? codes_ + r * row_bytes_ : row_codes_[r];
  }
  const uint8_t* row_norms(uint32_t r) const {
    return row_norms_.empty() ? norms_ + size_t(r) * groups_ * 2 : row_norms_[r];
  }
  const uint16_t* norm_panel() const { return norm_panel_.data(); }
  const Int8Codebook& codebook() const { return codebook_; }
  uint64_t code_bytes() const { return row_bytes_ * out_; }

  // The codes again as 16-row tiles, so a SIMD kernel reads 16 rows' codes with one load
  // and its lanes are the rows (no per-row reduction): for block b (rows 16b .. 16b+15)
  // and each 4-byte unit u of a row's packed codes, the 64 bytes at
  // tiles() + (b * tile_units() + u) * 64 hold row 16b+i's bytes 4u .. 4u+3 at 4i (zero
  // past the last row). An owned copy (code_bytes() rounded up to whole blocks), made by
  // BuildTiles for 2- and 4-bit codes; nullptr until then. Kernels use the tiles where they
  // read them (ReadsTiles) for row ranges starting on a multiple of 16, the rows otherwise.
  const uint8_t* tiles() const { return tiles_.get(); }
  uint64_t tile_units() const { return row_bytes_ / 4; }
  // Bytes of the tiles (a multiple of 64), 0 for code widths without tiles.
  uint64_t TileBytes() const;
  // Builds them in an allocation of their own; false (nothing built) without tiles.
  bool BuildTiles();
  // Builds them at `dst` (TileBytes() bytes, 64-byte aligned, zeroed) inside a buffer that
  // `owner` keeps alive (one buffer can hold many matrices' tiles).
  bool BuildTiles(uint8_t* dst, std::shared_ptr<const uint8_t> owner);

 private:
  uint32_t out_ = 0, in_ = 0, in_pad_ = 0, group_ = 0, groups_ = 0, code_bits_ = 0;
  size_t width_index_ = 0;
  uint64_t row_bytes_ = 0;
  const uint8_t* codes_ = nullptr;  // contiguous rows (Create), else the row tables (Stack)
  const uint8_t* norms_ = nullptr;
  std::vector<const uint8_t*> row_codes_, row_norms_;
  std::vector<uint16_t> norm_panel_;
  std::shared_ptr<const uint8_t> tiles_;
  Int8Codebook codebook_;

  void BuildNormPanel();
};

// ---------------------------------------------------------------- activations
// kInt8: one int8 per value (q1). kInt8x2: also the rounding residual as a second int8,
// q2 = round((u * 127 / amax - q1) * 128), so the value is (q1 + q2 / 128) * scale: ~15
// bits of precision for one more int8 dot product per code (the official engine's
// numerics are kInt8).
enum class ActPrecision { kInt8 = 1, kInt8x2 = 2 };
// Which permuted layouts a batch builds: kLayoutPerm2 | kLayoutPerm4 (code_widths.h; each
// width's row says which its SIMD kernels read).

// Prepared activations for `tokens` input vectors of length `in` (zero padded to in_pad):
// per token, per group, the FWHT-rotated int8 values in three layouts (natural order, and
// the orders the SIMD kernels consume for 2-bit and 4-bit codes), the float scale and the
// int32 sum of the int8 values (for the unsigned-offset trick); with kInt8x2 the same for
// the residual level.
class ActivationBatch {
 public:
  ActivationBatch() = default;
  // (Re)shapes the batch; keeps the allocation when it is large enough.
  void Reset(uint32_t tokens, uint32_t in, uint32_t group,
             ActPrecision precision = ActPrecision::kInt8, uint32_t layouts = kAllLayouts);
  uint32_t layouts() const { return layouts_; }

  uint32_t tokens() const { return tokens_; }
  uint32_t in() const { return in_; }
  uint32_t in_pad() const { return in_pad_; }
  uint32_t group() const { return group_; }
  uint32_t groups() const { return groups_; }
  ActPrecision precision() const { return precision_; }
  bool two_level() const { return precision_ == ActPrecision::kInt8x2; }
  // Bytes from token t's data to token t + 1's (the same for every layout and level): the
  // row stride of the AMX kernel's activation tiles.
  size_t token_stride() const { return stride_; }

  // Level 0 (q1) or 1 (q2, only when two_level()).
  // Natural order: q[k] for k < in_pad, zero up to a multiple of 64.
  const int8_t* natural(uint32_t t, int level = 0) const { return base(t) + off_[level][0]; }
  // 2-bit order: per 256-code chunk, 4 runs of 64 bytes; code 16m + 4b + s of the chunk
  // sits at s * 64 + 4m + b (what the s-th 2-bit field of packed byte 4m + b multiplies).
  const int8_t* perm2(uint32_t t, int level = 0) const { return base(t) + off_[level][1]; }
  // 4-bit order: per 128-code chunk, 2 runs of 64 bytes; code 2j + s sits at s * 64 + j.
  const int8_t* perm4(uint32_t t, int level = 0) const { return base(t) + off_[level][2]; }
  // Dequantized activation = (q1 [+ q2 / 128]) * scale (scale includes 1/sqrt(group)).
  const float* scale(uint32_t t) const {
    return reinterpret_cast<const float*>(base(t) + scale_off_);
  }
  const int32_t* sum(uint32_t t, int level = 0) const {
    return reinterpret_cast<const int32_t*>(base(t) + sum_off_[level]);
  }

  int8_t* mutable_natural(uint32_t t, int level = 0) { return base(t) + off_[level][0]; }
  int8_t* mutable_perm2(uint32_t t, int level = 0) { return base(t) + off_[level][1]; }
  int8_t* mutable_perm4(uint32_t t, int level = 0) { return base(t) + off_[level][2]; }
  float* mutable_scale(uint32_t t) { return reinterpret_cast<float*>(base(t) + scale_off_); }
  int32_t* mutable_sum(uint32_t t, int level = 0) {
    return reinterpret_cast<int32_t*>(base(t) + sum_off_[level]);
  }

 private:
  int8_t* base(uint32_t t) const { return storage_.get() + size_t(t) * stride_; }
  struct Free {
    void operator()(int8_t* p) const;
  };
  std::unique_ptr<int8_t[], Free> storage_;
  size_t capacity_ = 0, stride_ = 0;
  size_t off_[2][3] = {}, scale_off_ = 0, sum_off_[2] = {};
  uint32_t tokens_ = 0, in_ = 0, in_pad_ = 0, group_ = 0, groups_ = 0;
  ActPrecision precision_ = ActPrecision::kInt8;
  uint32_t layouts_ = kAllLayouts;
};

// x: `tokens` rows of `in` floats, row stride x_stride floats. Rotates each group with the
// orthonormal FWHT, quantizes: amax = max|u| over the group (u = unnormalised transform);
// p = u * (127 / amax); q1 = clamp(nearbyint(p), -127, 127); with kInt8x2
// q2 = clamp(nearbyint((p - q1) * 128), -127, 127); scale = amax * (1 / (127 sqrt(group))).
// An all-zero group has q = 0, scale = 0; a group with a NaN/inf has q = 0, scale = NaN.
// Threads over tokens when there are many (and not already in a parallel region).
void PrepareActivations(const float* x, uint32_t tokens, size_t x_stride, uint32_t in,
                        uint32_t group, ActivationBatch* out,
                        ActPrecision precision = ActPrecision::kInt8);
void PrepareActivations(Isa isa, const float* x, uint32_t tokens, size_t x_stride, uint32_t in,
                        uint32_t group, ActivationBatch* out,
                        ActPrecision precision = ActPrecision::kInt8);
// Prepares token t of an already Reset batch (callers that share tokens out themselves).
void PrepareToken(const float* x, ActivationBatch* out, uint32_t t);

// ---------------------------------------------------------------- products
// y[r] for rows [row_begin, row_end) of token t (y indexed by absolute row). Any range
// works; ranges starting on a multiple of 16 (RowSplit) are fastest. No threading: for use
// inside the caller's parallel region.
void MatVecRows(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
                uint32_t row_end, float* y);
// All rows; threads over 16-row blocks with OpenMP when the matrix is large
// (>= kParallelCodeBytes of codes) and the caller is not already in a parallel region.
void MatVec(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, float* y);
// All tokens of the batch: y[t * y_stride + r]. Each unpacked code panel (16 rows) is reused
// over every token. Rows as in MatVecRows.
void MatMatRows(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                uint32_t row_end, float* y, size_t y_stride);
void MatMat(const CqKernelMatrix& m, const ActivationBatch& a, float* y, size_t y_stride);

// Whether the active ISA's products read m's 16-row tiles (CqKernelMatrix::BuildTiles):
// worth building them only then.
bool ReadsTiles(const CqKernelMatrix& m);
bool ReadsTiles(Isa isa, const CqKernelMatrix& m);

// Explicit-ISA variants (tests and benchmarks).
void MatVecRows(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                uint32_t row_begin, uint32_t row_end, float* y);
void MatMatRows(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                uint32_t row_end, float* y, size_t y_stride);
// The exact int32 group dot products dot[r - row_begin][g] (what every kernel computes
// before scaling): with M = 128 when the batch is two-level or the codebook has a
// residual, else 1,
//   D = M * sum_k hi[code_k] q1_k + [two-level] sum_k hi[code_k] q2_k
//       + [codebook residual] sum_k lo[code_k] q1_k,
// and the output adds float(norm) * (act_scale * (cb_scale / M)) * float(D) per group.
// For the SIMD == scalar tests.
void GroupDots(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
               uint32_t row_begin, uint32_t row_end, int32_t* dots);

inline constexpr uint64_t kParallelCodeBytes = 96 * 1024;

// Rows [begin, end) of part `part` of `parts`, split on 16-row boundaries.
struct RowRange {
  uint32_t begin, end;
};
RowRange RowSplit(uint32_t rows, uint32_t parts, uint32_t part);

}  // namespace cact::kernels
