// Portable parts of the CQ kernels: codebook mapping, matrix and activation containers, and
// the dispatching entry points (the ISA choice is isa.cc's).
#include "engine/kernels/cq_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/kernels/half.h"
#include "engine/kernels/kernel_table.h"

namespace cact::kernels {
namespace {

const internal::KernelTable& Table(Isa isa) {
  switch (isa) {
    case Isa::kAmx:
      return internal::AmxTable();
    case Isa::kAvx512Vbmi:
      return internal::Avx512VbmiTable();
    case Isa::kAvx512:
      return internal::Avx512Table();
    case Isa::kAvxVnni:
      return internal::AvxVnniTable();
    case Isa::kAvx2:
      return internal::Avx2Table();
    case Isa::kScalar:
      break;
  }
  return internal::ScalarTable();
}

size_t RoundUp(size_t v, size_t m) { return (v + m - 1) / m * m; }

}  // namespace

// ------------------------------------------------------------------ codebook

absl::StatusOr<Int8Codebook> MakeInt8Codebook(std::span<const float> cb, uint32_t code_bits,
                                              bool residual) {
  Int8Codebook out;
  out.code_bits = code_bits;
  if (code_bits == 2 && cb.size() == 3) {
    if (cb.size() != 3 || !(cb[2] > 0.f) || cb[0] != -cb[2] || cb[1] != 0.f)
      return absl::InvalidArgumentError("ternary codebook must be {-l, 0, +l} with l > 0");
    // Crumbs 3, 0, 1 hold trits -1, 0, +1; crumb 2 never occurs in a valid file: 0.
    out.value[0] = 0;
    out.value[1] = 1;
    out.value[2] = 0;
    out.value[3] = -1;
    out.scale = cb[2];
    return out;
  }
  const CodeWidth* width = FindCodeWidth(code_bits);
  if (!width)
    return absl::InvalidArgumentError(absl::StrFormat("unsupported CQ code width %u", code_bits));
  if (cb.size() != width->levels())
    return absl::InvalidArgumentError(
        absl::StrFormat("codebook for %u-bit codes needs %u entries, got %u", code_bits,
                        width->levels(), cb.size()));
  float maxabs = 0.f;
  for (float v : cb) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("codebook has a non-finite value");
    maxabs = std::max(maxabs, std::fabs(v));
  }
  if (!(maxabs > 0.f)) return absl::InvalidArgumentError("codebook is all zero");
  for (size_t k = 0; k < cb.size(); ++k) {
    const double c = double(cb[k]) * 127.0 / double(maxabs);
    out.value[k] = int8_t(std::nearbyint(c));
    if (residual) out.lo[k] = int8_t(std::nearbyint((c - out.value[k]) * 128.0));
  }
  out.has_lo = residual;
  out.scale = maxabs / 127.f;
  return out;
}

// ------------------------------------------------------------------ matrices

absl::StatusOr<CqKernelMatrix> CqKernelMatrix::Create(std::span<const uint8_t> blob, uint32_t out,
                                                      uint32_t in, uint32_t group,
                                                      uint32_t code_bits,
                                                      const Int8Codebook& codebook) {
  if (group < 32 || group > 512 || (group & (group - 1)))
    return absl::InvalidArgumentError(
        absl::StrFormat("CQ group %u not a power of two in 32..512", group));
  const CodeWidth* width = FindCodeWidth(code_bits);
  if (!width)
    return absl::InvalidArgumentError(absl::StrFormat("unsupported CQ code width %u", code_bits));
  if (codebook.code_bits != code_bits)
    return absl::InvalidArgumentError(absl::StrFormat("codebook is for %u-bit codes, matrix has %u",
                                                      codebook.code_bits, code_bits));
  if (out == 0 || in == 0) return absl::InvalidArgumentError("empty CQ matrix");
  CqKernelMatrix m;
  m.out_ = out;
  m.in_ = in;
  m.group_ = group;
  m.in_pad_ = uint32_t((uint64_t(in) + group - 1) / group * group);
  m.groups_ = m.in_pad_ / group;
  m.code_bits_ = code_bits;
  m.width_index_ = CodeWidthIndex(code_bits);
  m.row_bytes_ = width->RowBytes(m.in_pad_);
  uint64_t need = m.row_bytes_ * out + uint64_t(out) * m.groups_ * 2;
  if (blob.size() != need)
    return absl::InvalidArgumentError(
        absl::StrFormat("CQ blob has %u bytes, [%u, %u] group %u code bits %u needs %u",
                        blob.size(), out, in, group, code_bits, need));
  m.codes_ = blob.data();
  m.norms_ = blob.data() + m.row_bytes_ * out;
  m.codebook_ = codebook;
  m.BuildNormPanel();
  return m;
}

void CqKernelMatrix::BuildNormPanel() {
  const uint32_t blocks = (out_ + 15) / 16;
  norm_panel_.assign(size_t(blocks) * groups_ * 16, 0);
  for (uint32_t r = 0; r < out_; ++r)
    for (uint32_t g = 0; g < groups_; ++g)
      norm_panel_[(size_t(r / 16) * groups_ + g) * 16 + r % 16] =
          LoadHalfBits(row_norms(r) + size_t(g) * 2);
}

uint64_t CqKernelMatrix::TileBytes() const {
  if (code_bits_ != 2 && code_bits_ != 4) return 0;
  return (uint64_t(out_) + 15) / 16 * tile_units() * 64;
}

bool CqKernelMatrix::BuildTiles() {
  const uint64_t bytes = TileBytes();
  if (bytes == 0) return false;
  uint8_t* t = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  if (!t) return false;
  std::memset(t, 0, bytes);
  return BuildTiles(t, std::shared_ptr<const uint8_t>(
                           t, [](const uint8_t* p) { std::free(const_cast<uint8_t*>(p)); }));
}

bool CqKernelMatrix::BuildTiles(uint8_t* dst, std::shared_ptr<const uint8_t> owner) {
  if (TileBytes() == 0) return false;
  const uint64_t units = tile_units();
  for (uint32_t r0 = 0; r0 < out_; r0 += 16) {  // writes in order, reads 16 rows in step
    const uint32_t rows = std::min(16u, out_ - r0);
    const uint8_t* row[16];
    for (uint32_t i = 0; i < rows; ++i) row[i] = row_codes(r0 + i);
    uint8_t* d = dst + size_t(r0 / 16) * units * 64;
    for (uint64_t u = 0; u < units; ++u, d += 64)
      for (uint32_t i = 0; i < rows; ++i) std::memcpy(d + 4 * i, row[i] + 4 * u, 4);
  }
  tiles_ = std::shared_ptr<const uint8_t>(std::move(owner), dst);  // aliasing: owner's lifetime
  return true;
}

namespace {
bool SameCodebook(const Int8Codebook& a, const Int8Codebook& b) {
  return a.code_bits == b.code_bits && a.has_lo == b.has_lo && a.scale == b.scale &&
         std::memcmp(a.value, b.value, sizeof a.value) == 0 &&
         std::memcmp(a.lo, b.lo, sizeof a.lo) == 0;
}
}  // namespace

absl::StatusOr<CqKernelMatrix> CqKernelMatrix::Stack(std::span<const RowSlice> slices) {
  if (slices.empty()) return absl::InvalidArgumentError("stack of no CQ matrices");
  const CqKernelMatrix& first = *slices[0].matrix;
  CqKernelMatrix m;
  m.in_ = first.in_;
  m.in_pad_ = first.in_pad_;
  m.group_ = first.group_;
  m.groups_ = first.groups_;
  m.code_bits_ = first.code_bits_;
  m.width_index_ = first.width_index_;
  m.row_bytes_ = first.row_bytes_;
  m.codebook_ = first.codebook_;
  for (const RowSlice& s : slices) {
    const CqKernelMatrix& p = *s.matrix;
    if (p.in_ != m.in_ || p.group_ != m.group_ || p.code_bits_ != m.code_bits_ ||
        !SameCodebook(p.codebook_, m.codebook_))
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot stack CQ matrices of different shapes: in %u group %u code bits %u vs in %u "
          "group %u code bits %u (or different codebooks)",
          p.in_, p.group_, p.code_bits_, m.in_, m.group_, m.code_bits_));
    if (s.begin > s.end || s.end > p.out_)
      return absl::InvalidArgumentError(absl::StrFormat(
          "stack slice rows [%u, %u) outside a %u-row matrix", s.begin, s.end, p.out_));
    for (uint32_t r = s.begin; r < s.end; ++r) {
      m.row_codes_.push_back(p.row_codes(r));
      m.row_norms_.push_back(p.row_norms(r));
    }
  }
  m.out_ = uint32_t(m.row_codes_.size());
  if (m.out_ == 0) return absl::InvalidArgumentError("stack of no CQ rows");
  m.BuildNormPanel();
  return m;
}

// ------------------------------------------------------------------ activations

void ActivationBatch::Free::operator()(int8_t* p) const { std::free(p); }

void ActivationBatch::Reset(uint32_t tokens, uint32_t in, uint32_t group, ActPrecision precision,
                            uint32_t layouts) {
  layouts_ = layouts;
  tokens_ = tokens;
  in_ = in;
  group_ = group;
  precision_ = precision;
  in_pad_ = uint32_t((uint64_t(in) + group - 1) / group * group);
  groups_ = in_pad_ / group;
  size_t off = 0;
  const int levels = precision == ActPrecision::kInt8x2 ? 2 : 1;
  for (int l = 0; l < 2; ++l) {
    if (l >= levels) {  // unused level: alias level 0 (never read)
      for (int k = 0; k < 3; ++k) off_[l][k] = off_[0][k];
      continue;
    }
    off_[l][0] = off;
    off_[l][1] = off_[l][0] + RoundUp(in_pad_, 64);
    off_[l][2] = off_[l][1] + RoundUp(in_pad_, 256);
    off = off_[l][2] + RoundUp(in_pad_, 128);
  }
  scale_off_ = off;
  sum_off_[0] = scale_off_ + RoundUp(size_t(groups_) * 4, 64);
  sum_off_[1] = sum_off_[0] + RoundUp(size_t(groups_) * 4, 64);
  stride_ = sum_off_[1] + RoundUp(size_t(groups_) * 4, 64);
  size_t need = stride_ * std::max<uint32_t>(tokens, 1);
  if (need > capacity_) {
    storage_.reset(static_cast<int8_t*>(std::aligned_alloc(64, need)));
    capacity_ = need;
  }
}

void PrepareActivations(Isa isa, const float* x, uint32_t tokens, size_t x_stride, uint32_t in,
                        uint32_t group, ActivationBatch* out, ActPrecision precision) {
  out->Reset(tokens, in, group, precision);
  auto prepare = Table(isa).prepare;
  if (tokens >= 8 && omp_get_level() == 0 && omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (uint32_t t = 0; t < tokens; ++t) prepare(x + size_t(t) * x_stride, out, t);
  } else {
    for (uint32_t t = 0; t < tokens; ++t) prepare(x + size_t(t) * x_stride, out, t);
  }
}

void PrepareActivations(const float* x, uint32_t tokens, size_t x_stride, uint32_t in,
                        uint32_t group, ActivationBatch* out, ActPrecision precision) {
  PrepareActivations(ActiveIsa(), x, tokens, x_stride, in, group, out, precision);
}

void PrepareToken(const float* x, ActivationBatch* out, uint32_t t) {
  Table(ActiveIsa()).prepare(x, out, t);
}

// ------------------------------------------------------------------ products

RowRange RowSplit(uint32_t rows, uint32_t parts, uint32_t part) {
  uint32_t blocks = (rows + 15) / 16;
  uint32_t b0 = uint32_t(uint64_t(blocks) * part / parts);
  uint32_t b1 = uint32_t(uint64_t(blocks) * (part + 1) / parts);
  return {std::min(rows, b0 * 16), std::min(rows, b1 * 16)};
}

// The SIMD kernels read the permuted layout of the matrix's width: it must be built.
void CheckLayout(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a) {
  const uint32_t need = m.width().layout;
  if (isa != Isa::kScalar && (a.layouts() & need) != need) {
    std::fprintf(stderr, "cact kernels: activation batch lacks the layout a %u-bit matrix needs\n",
                 m.code_bits());
    std::abort();
  }
}

bool ReadsTiles(Isa isa, const CqKernelMatrix& m) { return Table(isa).For(m).reads_tiles; }

bool ReadsTiles(const CqKernelMatrix& m) { return ReadsTiles(ActiveIsa(), m); }

void MatVecRows(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
                uint32_t row_begin, uint32_t row_end, float* y) {
  if (row_begin >= row_end) return;
  CheckLayout(isa, m, a);
  Table(isa).For(m).matvec(m, a, t, row_begin, row_end, y);
}

void MatVecRows(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, uint32_t row_begin,
                uint32_t row_end, float* y) {
  MatVecRows(ActiveIsa(), m, a, t, row_begin, row_end, y);
}

void MatVec(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t, float* y) {
  Isa isa = ActiveIsa();
  if (m.code_bytes() >= kParallelCodeBytes && omp_get_level() == 0 && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      RowRange r = RowSplit(m.out(), omp_get_num_threads(), omp_get_thread_num());
      MatVecRows(isa, m, a, t, r.begin, r.end, y);
    }
  } else {
    MatVecRows(isa, m, a, t, 0, m.out(), y);
  }
}

void MatMatRows(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                uint32_t row_end, float* y, size_t y_stride) {
  if (row_begin >= row_end || a.tokens() == 0) return;
  CheckLayout(isa, m, a);
  Table(isa).For(m).matmat(m, a, row_begin, row_end, y, y_stride);
}

void MatMatRows(const CqKernelMatrix& m, const ActivationBatch& a, uint32_t row_begin,
                uint32_t row_end, float* y, size_t y_stride) {
  MatMatRows(ActiveIsa(), m, a, row_begin, row_end, y, y_stride);
}

void MatMat(const CqKernelMatrix& m, const ActivationBatch& a, float* y, size_t y_stride) {
  Isa isa = ActiveIsa();
  if (m.code_bytes() * a.tokens() >= kParallelCodeBytes && omp_get_level() == 0 &&
      omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      RowRange r = RowSplit(m.out(), omp_get_num_threads(), omp_get_thread_num());
      MatMatRows(isa, m, a, r.begin, r.end, y, y_stride);
    }
  } else {
    MatMatRows(isa, m, a, 0, m.out(), y, y_stride);
  }
}

void GroupDots(Isa isa, const CqKernelMatrix& m, const ActivationBatch& a, uint32_t t,
               uint32_t row_begin, uint32_t row_end, int32_t* dots) {
  if (row_begin >= row_end) return;
  CheckLayout(isa, m, a);
  Table(isa).For(m).group_dots(m, a, t, row_begin, row_end, dots);
}

namespace internal {

float ActScaleFactor(uint32_t group) { return float(1.0 / (127.0 * std::sqrt(double(group)))); }

uint32_t DotMultiplier(const ActivationBatch& a, const CqKernelMatrix& m) {
  return a.two_level() || m.codebook().has_lo ? 128 : 1;
}

void GroupScales(const ActivationBatch& a, uint32_t t, const CqKernelMatrix& m, float* gs) {
  const float* s = a.scale(t);
  const float k = m.codebook().scale / float(DotMultiplier(a, m));
  for (uint32_t g = 0; g < a.groups(); ++g) gs[g] = s[g] * k;
}

const uint16_t* BlockNorms(const CqKernelMatrix& m, uint32_t r0, uint32_t lanes, uint16_t* tmp) {
  const uint32_t G = m.groups();
  if (r0 % 16 + lanes <= 16 && r0 % lanes == 0)
    return m.norm_panel() + size_t(r0 / 16) * G * 16 + r0 % 16;
  for (uint32_t g = 0; g < G; ++g)
    for (uint32_t i = 0; i < lanes; ++i)
      tmp[g * 16 + i] = r0 + i < m.out() ? LoadHalfBits(m.row_norms(r0 + i) + size_t(g) * 2) : 0;
  return tmp;
}

void BuildPermutedLayoutsScalar(ActivationBatch* a, uint32_t t, int level) {
  const int8_t* q = a->natural(t, level);
  int8_t* p2 = a->mutable_perm2(t, level);
  int8_t* p4 = a->mutable_perm4(t, level);
  size_t n2 = a->layouts() & kLayoutPerm2 ? RoundUp(a->in_pad(), 256) : 0;
  size_t n4 = a->layouts() & kLayoutPerm4 ? RoundUp(a->in_pad(), 128) : 0;
  for (size_t k = 0; k < n2; ++k) {
    size_t c = k / 256, r = k % 256, m = r / 16, b = (r / 4) % 4, s = r % 4;
    p2[c * 256 + s * 64 + 4 * m + b] = k < a->in_pad() ? q[k] : 0;
  }
  for (size_t k = 0; k < n4; ++k) {
    size_t c = k / 128, r = k % 128, j = r / 2, s = r % 2;
    p4[c * 128 + s * 64 + j] = k < a->in_pad() ? q[k] : 0;
  }
}

}  // namespace internal
}  // namespace cact::kernels
