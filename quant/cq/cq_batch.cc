#include "quant/cq/cq_batch.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "quant/cq/fp16.h"
#include "quant/cq/fwht.h"

// Lane values are passed between always-inline helpers only; the vector-ABI note is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

#define CACT_ALWAYS_INLINE [[gnu::always_inline]] inline
#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer: ifunc resolvers run before its runtime is up and crash; one baseline copy.
#define CACT_CLONES
#else
#define CACT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace cact::cq_internal {
namespace {

constexpr uint32_t kLanes = 16;
constexpr float kMinNorm = 1e-12f;  // np.maximum(norm, 1e-12) on a float32 array

// One value per lane (GCC vector extension: element-wise IEEE float32 operations, mapped
// onto whatever vector width the clone was compiled for).
typedef float Lanes __attribute__((vector_size(4 * kLanes)));
typedef int32_t LaneMask __attribute__((vector_size(4 * kLanes)));

CACT_ALWAYS_INLINE Lanes Abs(const Lanes& x) { return (Lanes)((LaneMask)x & 0x7FFFFFFF); }

// n Lanes in float storage aligned by hand: std::vector<Lanes> would drop the vector
// type's 64-byte alignment (attributes do not survive template arguments).
class LaneArray {
 public:
  explicit LaneArray(size_t n) : store_((n + 1) * kLanes) {
    uintptr_t a = (reinterpret_cast<uintptr_t>(store_.data()) + 63) & ~uintptr_t{63};
    data_ = reinterpret_cast<Lanes*>(a);
  }
  Lanes* data() { return data_; }

 private:
  std::vector<float> store_;
  Lanes* data_;
};

// numpy's pairwise float32 sum (numpy_sum.h), lane-wise, for n <= 128 ...
CACT_ALWAYS_INLINE Lanes PairwiseBlock(const Lanes* a, uint32_t n) {
  if (n < 8) {
    Lanes res = {};
    for (uint32_t i = 0; i < n; ++i) res = res + a[i];
    return res;
  }
  Lanes r[8];
  for (int j = 0; j < 8; ++j) r[j] = a[j];
  uint32_t i = 8;
  for (; i < n - (n % 8); i += 8)
    for (int j = 0; j < 8; ++j) r[j] = r[j] + a[i + j];
  Lanes res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) res = res + a[i];
  return res;
}

// ... and for a power of two above 128, where numpy's recursion halves exactly down to
// 128-blocks: a balanced tree of block sums. (Not the recursive template: everything here
// must inline into the ISA clone.)
CACT_ALWAYS_INLINE Lanes PairwiseSumLanes(const Lanes* a, uint32_t n, Lanes* scratch) {
  if (n <= 128) return PairwiseBlock(a, n);
  const uint32_t blocks = n / 128;
  for (uint32_t b = 0; b < blocks; ++b) scratch[b] = PairwiseBlock(a + b * 128, 128);
  for (uint32_t width = blocks; width > 1; width /= 2)
    for (uint32_t b = 0; b < width / 2; ++b) scratch[b] = scratch[2 * b] + scratch[2 * b + 1];
  return scratch[0];
}

// Sign of H[j][k] as +-1.0f, row k contiguous over j (the order the sum runs in).
std::vector<float> BuildSignTable(uint32_t g) {
  std::vector<float> t(size_t(g) * g);
  for (uint32_t k = 0; k < g; ++k)
    for (uint32_t j = 0; j < g; ++j)
      t[size_t(k) * g + j] = std::popcount(j & k) & 1u ? -1.0f : 1.0f;
  return t;
}

constexpr uint32_t kMaxCachedLog2 = 9;  // tables up to g = 512 (1 MB) are kept

const float* CachedSignTable(uint32_t g) {
  static std::array<std::unique_ptr<std::vector<float>>, kMaxCachedLog2 + 1> tables;
  static std::array<std::once_flag, kMaxCachedLog2 + 1> once;
  const uint32_t lg = uint32_t(std::countr_zero(g));
  if (lg > kMaxCachedLog2) return nullptr;
  std::call_once(once[lg],
                 [&] { tables[lg] = std::make_unique<std::vector<float>>(BuildSignTable(g)); });
  return tables[lg]->data();
}

// x <- FWHT(x) * scale, lane-wise, butterflies in the order of FwhtUnnormalized.
CACT_ALWAYS_INLINE void FwhtLanes(Lanes* x, uint32_t g, float scale) {
  for (uint32_t h = 1; h < g; h <<= 1)
    for (uint32_t i = 0; i < g; i += 2 * h)
      for (uint32_t j = i; j < i + h; ++j) {
        const Lanes a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  for (uint32_t j = 0; j < g; ++j) x[j] = x[j] * scale;
}

// y <- x @ (H/sqrt(g)) in the reference BLAS order: for every output a left-to-right sum
// of the rounded products x_j * (+-scale). The sign is applied by an exact multiply by +-1.
// Four outputs are summed side by side: one output's sum is a chain of dependent adds, four
// independent chains keep the adder busy; each output still adds in its own order (same bits).
CACT_ALWAYS_INLINE void ExporterRotateLanes(Lanes* x, uint32_t g, float scale, const float* signs,
                                            Lanes* y) {
  for (uint32_t j = 0; j < g; ++j) x[j] = x[j] * scale;
  uint32_t k = 0;
  for (; k + 4 <= g; k += 4) {
    const float* r0 = signs + size_t(k) * g;
    const float *r1 = r0 + g, *r2 = r1 + g, *r3 = r2 + g;
    Lanes a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (uint32_t j = 0; j < g; ++j) {
      a0 = a0 + x[j] * r0[j];
      a1 = a1 + x[j] * r1[j];
      a2 = a2 + x[j] * r2[j];
      a3 = a3 + x[j] * r3[j];
    }
    y[k] = a0, y[k + 1] = a1, y[k + 2] = a2, y[k + 3] = a3;
  }
  for (; k < g; ++k) {
    const float* row = signs + size_t(k) * g;
    Lanes acc = {};
    for (uint32_t j = 0; j < g; ++j) acc = acc + x[j] * row[j];
    y[k] = acc;
  }
}

// Official nearest entry, written without gathers: the result is the number of k in
// [1, L-1] with idx >= k. With p = clamp(searchsorted_left(cb, v), 1, L-1) (NaN sorts
// last) and idx = p - 1 + !(|v - cb[p-1]| <= |v - cb[p]|):
//   idx >= k  <=>  p > k  or  (p == k and !(|v - cb[k-1]| <= |v - cb[k]|)).
template <int L>
CACT_ALWAYS_INLINE void NearestLanes(const Lanes& v, const float* cb, uint8_t* out) {
  const LaneMask nan = v != v;
  LaneMask count = {};
  for (int k = 1; k < L; ++k) {
    const float lo = cb[k - 1], hi = cb[k];
    const LaneMask above_lo = (lo < v) | nan;  // searchsorted >= k      (masks: -1 true)
    const LaneMask above_hi = (hi < v) | nan;  // searchsorted >= k + 1
    LaneMask p_gt, p_eq;
    if (L == 2) {
      p_gt = LaneMask{}, p_eq = ~LaneMask{};
    } else if (k == 1) {
      p_gt = above_hi, p_eq = ~above_hi;
    } else if (k == L - 1) {
      p_gt = LaneMask{}, p_eq = above_lo;
    } else {
      p_gt = above_hi, p_eq = above_lo & ~above_hi;
    }
    const LaneMask right = ~(Abs(v - lo) <= Abs(v - hi));
    count -= p_gt | (p_eq & right);
  }
  for (uint32_t l = 0; l < kLanes; ++l) out[l] = uint8_t(count[l]);
}

CACT_ALWAYS_INLINE void NearestAny(const Lanes& u, std::span<const float> cb, uint8_t* out) {
  switch (cb.size()) {
    case 3:
      return NearestLanes<3>(u, cb.data(), out);
    case 4:
      return NearestLanes<4>(u, cb.data(), out);
    case 8:
      return NearestLanes<8>(u, cb.data(), out);
    case 16:
      return NearestLanes<16>(u, cb.data(), out);
    default:
      break;
  }
  // Other sizes (not produced by this library): the direct formulation.
  const int n = int(cb.size());
  for (uint32_t l = 0; l < kLanes; ++l) {
    const float v = u[l];
    if (n < 2) {
      out[l] = 0;
      continue;
    }
    int pos = 0;
    for (int k = 0; k < n; ++k) pos += (cb[k] < v) | (v != v);
    pos = std::clamp(pos, 1, n - 1);
    out[l] = uint8_t(std::fabs(v - cb[pos - 1]) <= std::fabs(v - cb[pos]) ? pos - 1 : pos);
  }
}

struct GroupPos {
  uint64_t row;
  uint32_t col0, valid;  // first column, columns inside the logical matrix
};

CACT_ALWAYS_INLINE GroupPos Locate(const CqShape& s, uint64_t q) {
  GroupPos p;
  p.row = q / s.groups();
  p.col0 = uint32_t(q % s.groups()) * s.group;
  p.valid = std::min(s.group, s.in - p.col0);
  return p;
}

}  // namespace

CACT_CLONES
void QuantizeGroups(const float* w, const CqShape& s, std::span<const float> codebook,
                    CqRotation rotation, uint64_t q_begin, uint64_t q_end, uint8_t* codes,
                    uint16_t* norms, double* error_sq, double* signal_sq) {
  const uint32_t g = s.group;
  const float scale = HadamardScale(g);
  LaneArray x_store(g), t_store(g), scratch_store(g / 128 + 1);
  Lanes *x = x_store.data(), *t = t_store.data(), *scratch = scratch_store.data();
  std::vector<uint8_t> lane_codes(size_t(g) * kLanes);
  const float* signs = nullptr;
  std::vector<float> local_signs;
  if (rotation == CqRotation::kExporter) {
    signs = CachedSignTable(g);
    if (!signs) signs = (local_signs = BuildSignTable(g)).data();
  }
  for (uint64_t q0 = q_begin; q0 < q_end; q0 += kLanes) {
    const uint32_t n = uint32_t(std::min<uint64_t>(kLanes, q_end - q0));
    for (uint32_t l = 0; l < kLanes; ++l) {
      GroupPos p = l < n ? Locate(s, q0 + l) : GroupPos{0, 0, 0};
      const float* src = w + p.row * s.in + p.col0;
      for (uint32_t j = 0; j < g; ++j) x[j][l] = j < p.valid ? src[j] : 0.0f;
    }
    Lanes* rot = x;
    if (rotation == CqRotation::kExporter) {
      ExporterRotateLanes(x, g, scale, signs, t);
      std::swap(x, t);
      rot = x;
    } else {
      FwhtLanes(rot, g, scale);
    }
    for (uint32_t j = 0; j < g; ++j) t[j] = rot[j] * rot[j];
    const Lanes sum = PairwiseSumLanes(t, g, scratch);  // numpy's float32 order, per lane
    Lanes norm;
    for (uint32_t l = 0; l < kLanes; ++l) norm[l] = std::sqrt(sum[l]);
    const Lanes denom = norm < kMinNorm ? Lanes{} + kMinNorm : norm;  // NaN stays NaN
    for (uint32_t j = 0; j < g; ++j)  // divide by the unrounded norm
      NearestAny(rot[j] / denom, codebook, lane_codes.data() + size_t(j) * kLanes);
    for (uint32_t l = 0; l < n; ++l) {
      uint8_t* dst = codes + (q0 + l) * g;
      const uint16_t half = FloatToHalf(norm[l]);
      const float stored = HalfToFloat(half);
      float err = 0;  // the orthonormal rotation keeps distances: measure them rotated
      for (uint32_t j = 0; j < g; ++j) {
        const uint8_t c = lane_codes[size_t(j) * kLanes + l];
        dst[j] = c;
        const float d = rot[j][l] - (c < codebook.size() ? codebook[c] : 0.0f) * stored;
        err += d * d;
      }
      norms[q0 + l] = half;
      *error_sq += err;
      *signal_sq += double(sum[l]);
    }
  }
}

CACT_CLONES
void DequantizeGroups(std::span<const uint8_t> blob, const CqShape& s,
                      std::span<const float> codebook, CqRotation rotation, uint64_t q_begin,
                      uint64_t q_end, float* out, uint64_t out_row0) {
  const uint32_t g = s.group;
  const float scale = HadamardScale(g);
  // Codes that cannot occur (ternary crumb 2, short codebook) read 0, never past the end.
  float table[16] = {};
  for (size_t i = 0; i < std::min<size_t>(codebook.size(), 16); ++i) table[i] = codebook[i];
  LaneArray x_store(g), t_store(g);
  Lanes *x = x_store.data(), *t = t_store.data();
  std::vector<uint8_t> group_codes(g);
  const float* signs = nullptr;
  std::vector<float> local_signs;
  if (rotation == CqRotation::kExporter) {
    signs = CachedSignTable(g);
    if (!signs) signs = (local_signs = BuildSignTable(g)).data();
  }
  const uint8_t* norm_bytes = blob.data() + s.code_bytes();
  for (uint64_t q0 = q_begin; q0 < q_end; q0 += kLanes) {
    const uint32_t n = uint32_t(std::min<uint64_t>(kLanes, q_end - q0));
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (l >= n) {
        for (uint32_t j = 0; j < g; ++j) x[j][l] = 0.0f;
        continue;
      }
      GroupPos p = Locate(s, q0 + l);
      UnpackCodes(blob.data() + p.row * s.row_code_bytes(), p.col0, g, s.bits, group_codes.data());
      const float norm = LoadHalf(norm_bytes + 2 * (q0 + l));
      for (uint32_t j = 0; j < g; ++j) x[j][l] = table[group_codes[j] & 15] * norm;
    }
    Lanes* rot = x;
    if (rotation == CqRotation::kExporter) {
      ExporterRotateLanes(x, g, scale, signs, t);
      rot = t;
    } else {
      FwhtLanes(rot, g, scale);
    }
    for (uint32_t l = 0; l < n; ++l) {
      GroupPos p = Locate(s, q0 + l);
      float* dst = out + (p.row - out_row0) * s.in + p.col0;
      for (uint32_t j = 0; j < p.valid; ++j) dst[j] = rot[j][l];
    }
  }
}

}  // namespace cact::cq_internal
