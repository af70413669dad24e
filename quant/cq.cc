// CQ quantize / dequantize / pack. Numerics follow the exporter step by step (spec
// section 1): the rotation is the FWHT (the dense float32 matmul differs only in rounding
// order), the group norm uses numpy's pairwise float32 sum, the unit vector divides by the
// unrounded norm, and the nearest entry is searchsorted + "<=" in float32.
#include "quant/cq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "quant/fp16.h"
#include "quant/fwht.h"
#include "quant/numpy_sum.h"

namespace cact {
namespace {

constexpr float kMinNorm = 1e-12f;  // np.maximum(norm, 1e-12) on a float32 array

// The exporter's nearest entry: pos = searchsorted(cb, v) (left side; NaN sorts last),
// clipped to [1, L-1]; the left neighbour wins when its float32 distance is <= the right's.
inline uint8_t NearestIndex(float v, const float* cb, int levels) {
  int pos = 0;
  for (int k = 0; k < levels; ++k) pos += (cb[k] < v) | (v != v);
  pos = std::clamp(pos, 1, levels - 1);
  return uint8_t(std::fabs(v - cb[pos - 1]) <= std::fabs(v - cb[pos]) ? pos - 1 : pos);
}

template <int L>
void NearestCodes(const float* u, size_t n, const float* cb, uint8_t* codes) {
  for (size_t i = 0; i < n; ++i) codes[i] = NearestIndex(u[i], cb, L);  // L constant: unrolled
}

void NearestCodesAny(const float* u, size_t n, std::span<const float> cb, uint8_t* codes) {
  switch (cb.size()) {
    case 3: return NearestCodes<3>(u, n, cb.data(), codes);
    case 4: return NearestCodes<4>(u, n, cb.data(), codes);
    case 8: return NearestCodes<8>(u, n, cb.data(), codes);
    case 16: return NearestCodes<16>(u, n, cb.data(), codes);
    default:
      if (cb.size() < 2) return std::fill(codes, codes + n, uint8_t{0});
      for (size_t i = 0; i < n; ++i) codes[i] = NearestIndex(u[i], cb.data(), int(cb.size()));
  }
}

// Quantizes one row: `w` has shape.in values; codes gets in_pad entries, norms groups().
void QuantizeRow(const float* w, const CqShape& s, std::span<const float> cb, float scale,
                 float* rot, float* tmp, uint8_t* codes, uint16_t* norms) {
  const uint32_t g = s.group;
  for (uint32_t gi = 0; gi < s.groups(); ++gi) {
    const uint32_t begin = gi * g;
    const uint32_t valid = begin >= s.in ? 0 : std::min(g, s.in - begin);
    std::memcpy(rot, w + begin, valid * sizeof(float));
    std::fill(rot + valid, rot + g, 0.0f);
    FwhtUnnormalized(rot, g);
    for (uint32_t i = 0; i < g; ++i) {
      rot[i] *= scale;
      tmp[i] = rot[i] * rot[i];
    }
    const float norm = std::sqrt(NumpyPairwiseSum(tmp, g));
    const float denom = std::max(norm, kMinNorm);
    for (uint32_t i = 0; i < g; ++i) tmp[i] = rot[i] / denom;
    NearestCodesAny(tmp, g, cb, codes + begin);
    norms[gi] = FloatToHalf(norm);
  }
}

// Codebook values indexed by stored code; codes that cannot occur (ternary crumb 2, or a
// short codebook) read 0 instead of past the end.
std::array<float, 16> CodeTable(std::span<const float> cb) {
  std::array<float, 16> t{};
  for (size_t i = 0; i < std::min<size_t>(cb.size(), 16); ++i) t[i] = cb[i];
  return t;
}

void DequantizeRowImpl(std::span<const uint8_t> blob, const CqShape& s,
                       const std::array<float, 16>& table, uint32_t row, float scale,
                       uint8_t* codes, float* buf, float* out) {
  const uint32_t g = s.group, in_pad = s.in_pad();
  UnpackRow(blob.data() + uint64_t(row) * s.row_code_bytes(), in_pad, s.bits, codes);
  const uint8_t* norm_bytes = blob.data() + s.code_bytes() + uint64_t(row) * s.groups() * 2;
  for (uint32_t gi = 0; gi < s.groups(); ++gi) {
    const float norm = LoadHalf(norm_bytes + 2 * gi);
    const uint8_t* c = codes + gi * g;
    for (uint32_t i = 0; i < g; ++i) buf[i] = table[c[i] & 15] * norm;
    FwhtUnnormalized(buf, g);
    const uint32_t begin = gi * g;
    const uint32_t valid = begin >= s.in ? 0 : std::min(g, s.in - begin);
    for (uint32_t i = 0; i < valid; ++i) out[begin + i] = buf[i] * scale;
  }
}

bool Parallel(const CqShape& s) { return uint64_t(s.out) * s.in_pad() >= (1u << 16); }

}  // namespace

void PackRow(const uint8_t* codes, uint32_t n, uint32_t bits, uint8_t* out) {
  const bool ternary = bits == 5;
  const uint32_t width = ternary ? 2 : bits;
  const uint32_t mask = (1u << width) - 1;
  uint64_t acc = 0;
  uint32_t filled = 0;
  size_t o = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t c = codes[i];
    if (ternary) c = c == 0 ? 3 : c - 1;  // crumbs 3, 0, 1 sign-extend to -1, 0, +1
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

void UnpackRow(const uint8_t* packed, uint32_t n, uint32_t bits, uint8_t* codes) {
  const bool ternary = bits == 5;
  const uint32_t width = ternary ? 2 : bits;
  const uint32_t mask = (1u << width) - 1;
  uint64_t acc = 0;
  uint32_t filled = 0;
  size_t p = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (filled < width) {
      acc |= uint64_t(packed[p++]) << filled;
      filled += 8;
    }
    uint32_t c = uint32_t(acc) & mask;
    acc >>= width;
    filled -= width;
    if (ternary) c = c == 3 ? 0 : c + 1;  // crumb 2 is not a trit: becomes 3 (reads as 0)
    codes[i] = uint8_t(c);
  }
}

CqMatrix QuantizeMatrix(const float* w, const CqShape& shape, std::span<const float> codebook) {
  CqMatrix m;
  m.shape = shape;
  const uint32_t in_pad = shape.in_pad(), groups = shape.groups();
  m.codes.resize(uint64_t(shape.out) * in_pad);
  m.norms.resize(uint64_t(shape.out) * groups);
  const float scale = HadamardScale(shape.group);
#pragma omp parallel if (Parallel(shape))
  {
    std::vector<float> rot(shape.group), tmp(shape.group);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < int64_t(shape.out); ++r)
      QuantizeRow(w + uint64_t(r) * shape.in, shape, codebook, scale, rot.data(), tmp.data(),
                  m.codes.data() + uint64_t(r) * in_pad, m.norms.data() + uint64_t(r) * groups);
  }
  return m;
}

std::vector<uint8_t> PackBlob(const CqMatrix& m) {
  const CqShape& s = m.shape;
  std::vector<uint8_t> blob(s.blob_bytes());
  const uint32_t in_pad = s.in_pad();
  for (uint64_t r = 0; r < s.out; ++r)
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
    UnpackRow(blob.data() + r * shape.row_code_bytes(), in_pad, shape.bits, m.codes.data() + r * in_pad);
  m.norms.resize(uint64_t(shape.out) * shape.groups());
  const uint8_t* p = blob.data() + shape.code_bytes();
  for (size_t i = 0; i < m.norms.size(); ++i) m.norms[i] = LoadU16(p + 2 * i);
  return m;
}

void DequantizeBlob(std::span<const uint8_t> blob, const CqShape& shape,
                    std::span<const float> codebook, float* out) {
  const std::array<float, 16> table = CodeTable(codebook);
  const float scale = HadamardScale(shape.group);
#pragma omp parallel if (Parallel(shape))
  {
    std::vector<uint8_t> codes(shape.in_pad());
    std::vector<float> buf(shape.group);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < int64_t(shape.out); ++r)
      DequantizeRowImpl(blob, shape, table, uint32_t(r), scale, codes.data(), buf.data(),
                        out + uint64_t(r) * shape.in);
  }
}

void DequantizeRow(std::span<const uint8_t> blob, const CqShape& shape,
                   std::span<const float> codebook, uint32_t row, float* out) {
  std::vector<uint8_t> codes(shape.in_pad());
  std::vector<float> buf(shape.group);
  DequantizeRowImpl(blob, shape, CodeTable(codebook), row, HadamardScale(shape.group),
                    codes.data(), buf.data(), out);
}

}  // namespace cact
