#include "engine/row_decode.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/kernels/fast_ops.h"
#include "formats/cact/cq_types.h"
#include "quant/cq/fp16.h"

namespace cact::fast {
namespace {

namespace kn = kernels;

// One row of a matrix record decoded on demand (embedding and engram table rows): codebook
// value times the group's norm, rotated back with the SIMD FWHT (kernels/fast_ops.h).
// `codes` and `norms` hold row `row`'s packed codes and FP16 norms (in the mapping, or a
// copy). Other dtypes go through MatrixView.
void DecodeCqRow(const MatrixView& v, uint32_t row, const uint8_t* codes, const uint8_t* norms,
                 float* out) {
  const CqShape& s = v.cq;
  const uint32_t bits = s.code_bits(), n = s.group, G = s.groups();
  // Each stored code's codebook value (ternary crumb 2 is no trit: it reads past the
  // codebook, so 0).
  const CqType& type = *FindCqType(s.bits);
  float cb[16] = {};
  for (uint32_t k = 0; k < (1u << bits); ++k) {
    const uint32_t index = type.CodebookIndex(k);
    cb[k] = index < v.codebook.size() ? v.codebook[index] : 0.f;
  }
  float buf[1024];
  for (uint32_t g = 0; g < G; ++g) {
    const float norm = LoadHalf(norms + 2 * g);
    float* w = n <= 1024 ? buf : nullptr;
    if (!w) {
      v.DequantizeRow(row, out);
      return;
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t bit = uint64_t(g * n + i) * bits;
      uint32_t word = codes[bit / 8];
      if (bit % 8 + bits > 8) word |= uint32_t(codes[bit / 8 + 1]) << 8;
      w[i] = cb[(word >> (bit % 8)) & ((1u << bits) - 1)] * norm;
    }
    kn::FwhtOrthonormal(w, n);
    const uint32_t base = g * n, take = std::min(n, s.in > base ? s.in - base : 0);
    std::memcpy(out + base, w, take * sizeof(float));
  }
}

bool DecodesByGroup(const MatrixView& v) { return v.is_cq() && v.cq.group >= 16; }

}  // namespace

void DecodeRow(const MatrixView& v, uint32_t row, float* out) {
  if (!DecodesByGroup(v)) return v.DequantizeRow(row, out);
  const CqShape& s = v.cq;
  DecodeCqRow(v, row, v.blob.data() + uint64_t(row) * s.row_code_bytes(),
              v.blob.data() + s.code_bytes() + uint64_t(row) * s.groups() * 2, out);
}

void ReadAndDecodeRow(const FileBytes& file, const MatrixView& v, uint32_t row, float* out) {
  if (!DecodesByGroup(v)) return v.DequantizeRow(row, out);
  const CqShape& s = v.cq;
  const uint64_t cb = s.row_code_bytes(), nb = uint64_t(s.groups()) * 2;
  thread_local std::vector<uint8_t> buf;
  buf.resize(cb + nb);
  file.ReadOut(v.blob.subspan(row * cb, cb), buf.data());
  file.ReadOut(v.blob.subspan(s.code_bytes() + row * nb, nb), buf.data() + cb);
  DecodeCqRow(v, row, buf.data(), buf.data() + cb, out);
}

}  // namespace cact::fast
