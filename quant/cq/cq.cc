// CQ pack/unpack and the matrix-level entry points. The per-group numerics live in
// cq_batch.cc; this file splits a matrix into chunks of groups for OpenMP.
#include "quant/cq/cq.h"

#include <algorithm>

#include "quant/cq/cq_batch.h"
#include "quant/cq/fp16.h"

namespace cact {
namespace {

constexpr uint64_t kChunkGroups = 256;  // groups per OpenMP work item (a multiple of 16)

bool Parallel(uint64_t groups, uint32_t group) { return groups * group >= (1u << 16); }

template <class Fn>
void ForEachChunk(uint64_t groups, uint32_t group, Fn fn) {
  const int64_t chunks = int64_t((groups + kChunkGroups - 1) / kChunkGroups);
#pragma omp parallel for schedule(dynamic, 4) if (Parallel(groups, group))
  for (int64_t c = 0; c < chunks; ++c)
    fn(uint64_t(c) * kChunkGroups, std::min(groups, uint64_t(c + 1) * kChunkGroups));
}

}  // namespace

void PackRow(const uint8_t* codes, uint32_t n, uint32_t bits, uint8_t* out) {
  const CqType* type = FindCqType(bits);
  const uint32_t width = CqCodeBits(bits);
  const uint32_t mask = (1u << width) - 1;
  uint64_t acc = 0;
  uint32_t filled = 0;
  size_t o = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t c = type ? type->StoredCode(codes[i]) : codes[i];
    acc |= uint64_t(c & mask) << filled;
    filled += width;
    while (filled >= 8) {
      out[o++] = uint8_t(acc);
      acc >>= 8;
      filled -= 8;
    }
  }
  if (filled) out[o] = uint8_t(acc);
}

void UnpackCodes(const uint8_t* packed_row, uint64_t first, uint32_t n, uint32_t bits,
                 uint8_t* codes) {
  const CqType* type = FindCqType(bits);
  const uint32_t width = CqCodeBits(bits);
  const uint32_t mask = (1u << width) - 1;
  const uint64_t bit = first * width;
  const uint8_t* p = packed_row + bit / 8;
  uint64_t acc = 0;
  uint32_t filled = 0;
  if (bit % 8) {
    acc = *p++ >> (bit % 8);
    filled = 8 - uint32_t(bit % 8);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (filled < width) {
      acc |= uint64_t(*p++) << filled;
      filled += 8;
    }
    const uint32_t c = uint32_t(acc) & mask;
    acc >>= width;
    filled -= width;
    codes[i] = uint8_t(type ? type->CodebookIndex(c) : c);  // ternary crumb 2: 3 (reads as 0)
  }
}

void UnpackRow(const uint8_t* packed, uint32_t n, uint32_t bits, uint8_t* codes) {
  UnpackCodes(packed, 0, n, bits, codes);
}

CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook) {
  return QuantizeMatrix(w, shape, codebook, CqRotation::kFwht);
}

CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook,
                        CqRotation rotation) {
  CqMatrix m;
  m.shape = shape;
  const uint64_t groups = uint64_t(shape.out) * shape.groups();
  m.codes.resize(groups * shape.group);
  m.norms.resize(groups);
  double error_sq = 0, signal_sq = 0;
  ForEachChunk(groups, shape.group, [&](uint64_t begin, uint64_t end) {
    double e = 0, s = 0;
    cq_internal::QuantizeGroups(w, shape, codebook, rotation, begin, end, m.codes.data(),
                                m.norms.data(), &e, &s);
#pragma omp critical(cact_cq_stats)
    {
      error_sq += e;
      signal_sq += s;
    }
  });
  m.error_sq = error_sq;
  m.signal_sq = signal_sq;
  return m;
}

std::vector<uint8_t> PackBlob(const CqMatrix& m) {
  const CqShape& s = m.shape;
  std::vector<uint8_t> blob(s.blob_bytes());
  const uint32_t in_pad = s.in_pad();
#pragma omp parallel for schedule(static) if (Parallel(uint64_t(s.out) * s.groups(), s.group))
  for (int64_t r = 0; r < int64_t(s.out); ++r)
    PackRow(m.codes.data() + r * in_pad, in_pad, s.bits, blob.data() + r * s.row_code_bytes());
  uint8_t* p = blob.data() + s.code_bytes();
  for (uint16_t h : m.norms) {
    *p++ = uint8_t(h);
    *p++ = uint8_t(h >> 8);
  }
  return blob;
}

CqMatrix UnpackBlob(std::span<const uint8_t> blob, const CqShape& shape) {
  CqMatrix m;
  m.shape = shape;
  const uint32_t in_pad = shape.in_pad();
  m.codes.resize(uint64_t(shape.out) * in_pad);
  for (uint64_t r = 0; r < shape.out; ++r)
    UnpackRow(blob.data() + r * shape.row_code_bytes(), in_pad, shape.bits,
              m.codes.data() + r * in_pad);
  m.norms.resize(uint64_t(shape.out) * shape.groups());
  const uint8_t* p = blob.data() + shape.code_bytes();
  for (size_t i = 0; i < m.norms.size(); ++i) m.norms[i] = LoadU16(p + 2 * i);
  return m;
}

namespace {

void DequantizeAll(std::span<const uint8_t> blob, const CqShape& shape,
                   std::span<const float> codebook, CqRotation rotation, float* out) {
  ForEachChunk(uint64_t(shape.out) * shape.groups(), shape.group,
               [&](uint64_t begin, uint64_t end) {
                 cq_internal::DequantizeGroups(blob, shape, codebook, rotation, begin, end, out, 0);
               });
}

void DequantizeOneRow(std::span<const uint8_t> blob, const CqShape& shape,
                      std::span<const float> codebook, CqRotation rotation, uint32_t row,
                      float* out) {
  const uint64_t g = shape.groups();
  cq_internal::DequantizeGroups(blob, shape, codebook, rotation, row * g, (row + 1) * g, out, row);
}

}  // namespace

void DequantizeBlob(std::span<const uint8_t> blob, const CqShape& shape,
                    std::span<const float> codebook, float* out) {
  DequantizeAll(blob, shape, codebook, CqRotation::kExporter, out);
}

void DequantizeRow(std::span<const uint8_t> blob, const CqShape& shape,
                   std::span<const float> codebook, uint32_t row, float* out) {
  DequantizeOneRow(blob, shape, codebook, CqRotation::kExporter, row, out);
}

void DequantizeBlobFwht(std::span<const uint8_t> blob, const CqShape& shape,
                        std::span<const float> codebook, float* out) {
  DequantizeAll(blob, shape, codebook, CqRotation::kFwht, out);
}

void DequantizeRowFwht(std::span<const uint8_t> blob, const CqShape& shape,
                       std::span<const float> codebook, uint32_t row, float* out) {
  DequantizeOneRow(blob, shape, codebook, CqRotation::kFwht, row, out);
}

}  // namespace cact
