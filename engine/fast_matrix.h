// The fast path's view of the model's weight matrices: FastMatrix (a CQ record ready for
// the int8 kernels, or a dense copy for other dtypes), SharedInput (one input vector
// prepared once for all the matrices that consume it) and SplitRange (how a team shares
// a product's rows). Internal to engine/fast_forward.cc.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "engine/fast_forward.h"
#include "engine/kernels/cq_kernels.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "formats/cact/cq_types.h"

namespace cact::fast {

namespace kn = kernels;

// Rows [begin, end) of a matrix range split into `parts` pieces on 16-row boundaries
// (relative to the matrix, so the kernels use the aligned norm panels).
inline kn::RowRange SplitRange(uint32_t begin, uint32_t end, uint32_t parts, uint32_t part) {
  const uint32_t first = begin / 16, last = (end + 15) / 16;
  const uint32_t blocks = last - first;
  const uint32_t b0 = first + uint32_t(uint64_t(blocks) * part / parts);
  const uint32_t b1 = first + uint32_t(uint64_t(blocks) * (part + 1) / parts);
  return {std::clamp(b0 * 16, begin, end), std::clamp(b1 * 16, begin, end)};
}

// Whether a CQ type's int8 codebook carries the residual: an exact ternary one never does;
// 2-bit codebooks have their own switch (their residual costs the most time).
inline bool UseCodebookResidual(const CqType* type, const FastForwardOptions& fast) {
  if (!type || type->ternary) return false;
  return type->code_bits == 2 ? fast.codebook_residual_2bit : fast.codebook_residual;
}

// A weight matrix for the fast path: CQ records use the int8 kernels straight from the
// mapped blob; other dtypes (legal, unused by the exporter) fall back to a dense copy.
class FastMatrix {
 public:
  FastMatrix() = default;
  FastMatrix(const MatrixView& v, const FastForwardOptions& fast) : rows_(v.rows), cols_(v.cols) {
    if (v.is_cq()) {
      const bool residual = UseCodebookResidual(FindCqType(v.cq.bits), fast);
      auto cb = kn::MakeInt8Codebook(v.codebook, v.cq.code_bits(), residual);
      if (cb.ok()) {
        auto m = kn::CqKernelMatrix::Create(v.blob.first(v.cq.blob_bytes()), v.rows, v.cols,
                                            v.cq.group, v.cq.code_bits(), *cb);
        if (m.ok()) {
          cq_.emplace(std::move(m).value());
          return;
        }
      }
    }
    dense_ = v.Dequantize();
  }
  // Rows [begin, end) of several CQ matrices as one (kernels::CqKernelMatrix::Stack);
  // nullopt when a part is dense or the parts differ in shape or codebook.
  struct Slice {
    const FastMatrix* matrix;
    uint32_t begin, end;
  };
  static std::optional<FastMatrix> Stack(std::initializer_list<Slice> slices) {
    std::vector<kn::CqKernelMatrix::RowSlice> parts;
    for (const Slice& s : slices) {
      if (!s.matrix->cq_) return std::nullopt;
      parts.push_back({&*s.matrix->cq_, s.begin, s.end});
    }
    auto m = kn::CqKernelMatrix::Stack(parts);
    if (!m.ok()) return std::nullopt;
    FastMatrix out;
    out.rows_ = m->out();
    out.cols_ = m->in();
    out.cq_.emplace(std::move(m).value());
    return out;
  }
  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  // Bytes of the 16-row tiles of a CQ matrix whose active kernels read them, else 0. Once
  // built (at dst, inside owner's buffer), its products no longer read the file's codes
  // (kernels::CqKernelMatrix::BuildTiles).
  uint64_t TileBytesIfRead() const { return cq_ && kn::ReadsTiles(*cq_) ? cq_->TileBytes() : 0; }
  void BuildTiles(uint8_t* dst, std::shared_ptr<const uint8_t> owner) {
    if (cq_) cq_->BuildTiles(dst, std::move(owner));
  }
  bool has_tiles() const { return cq_ && cq_->tiles(); }
  // The activation group this matrix consumes (0: dense, reads the raw input).
  uint32_t group() const { return cq_ ? cq_->group() : 0; }
  // The permuted activation layout its kernel reads (its code width's row; 0 when dense).
  uint32_t layout() const { return cq_ ? cq_->width().layout : 0; }

  // y[t * y_stride + r] = row r . x_t for tokens t < n and rows [rb, re). CQ matrices read
  // the prepared batch `act` (its group), dense ones the raw x.
  void Apply(const float* x, size_t x_stride, const kn::ActivationBatch* act, uint32_t n,
             uint32_t rb, uint32_t re, float* y, size_t y_stride) const {
    if (rb >= re) return;
    if (cq_) {
      if (n == 1)
        kn::MatVecRows(*cq_, *act, 0, rb, re, y);
      else
        kn::MatMatRows(*cq_, *act, rb, re, y, y_stride);
      return;
    }
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t r = rb; r < re; ++r)
        y[t * y_stride + r] = ops::Dot(&dense_[size_t(r) * cols_], x + t * x_stride, cols_);
  }

 private:
  uint32_t rows_ = 0, cols_ = 0;
  std::optional<kn::CqKernelMatrix> cq_;
  std::vector<float> dense_;
};

// One input vector (per token) shared by several matrices: prepared once per distinct
// activation group among its consumers.
class SharedInput {
 public:
  void SetPrecision(kn::ActPrecision p) { precision_ = p; }
  void AddConsumer(const FastMatrix& m) {
    layouts_ |= m.layout();
    if (m.group() && std::find(groups_.begin(), groups_.end(), m.group()) == groups_.end()) {
      groups_.push_back(m.group());
      batches_.emplace_back();
    }
  }
  // Shapes the batches for n rows of `in` floats at x (stride x_stride); one thread.
  void Begin(const float* x, uint32_t n, size_t x_stride, uint32_t in) {
    x_ = x;
    stride_ = x_stride;
    for (size_t i = 0; i < groups_.size(); ++i)
      batches_[i].Reset(n, in, groups_[i], precision_, layouts_);
  }
  // Prepares row t (any thread; distinct rows may be prepared concurrently).
  void PrepareToken(uint32_t t) {
    for (kn::ActivationBatch& b : batches_) kn::PrepareToken(x_ + t * stride_, &b, t);
  }
  void Prepare(const float* x, uint32_t n, size_t x_stride, uint32_t in) {
    Begin(x, n, x_stride, in);
    for (uint32_t t = 0; t < n; ++t) PrepareToken(t);
  }
  void Apply(const FastMatrix& m, uint32_t n, uint32_t rb, uint32_t re, float* y,
             size_t y_stride) const {
    const kn::ActivationBatch* act = nullptr;
    for (size_t i = 0; i < groups_.size(); ++i)
      if (groups_[i] == m.group()) act = &batches_[i];
    m.Apply(x_, stride_, act, n, rb, re, y, y_stride);
  }

 private:
  std::vector<uint32_t> groups_;
  std::vector<kn::ActivationBatch> batches_;
  const float* x_ = nullptr;
  size_t stride_ = 0;
  kn::ActPrecision precision_ = kn::ActPrecision::kInt8x2;
  uint32_t layouts_ = 0;
};

}  // namespace cact::fast
