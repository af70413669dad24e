#include "engine/model.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/cact/finite_check.h"
#include "lib/status.h"
#include "quant/cq/fp16.h"

namespace cact {
namespace {

std::string ShapeString(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

bool IsPowerOfTwo(uint32_t x) { return x && !(x & (x - 1)); }

std::string StageList(const BlockSpec& b) {
  return absl::StrJoin(b.stages, ", ",
                       [](std::string* out, BlockStage s) { out->append(BlockStageName(s)); });
}

}  // namespace

// ---------------------------------------------------------------------------------------
// MatrixView

void MatrixView::Dequantize(float* out) const {
  if (is_cq()) {
    DequantizeBlob(blob, cq, codebook, out);
    return;
  }
  for (uint32_t r = 0; r < rows; ++r) DequantizeRow(r, out + uint64_t(r) * cols);
}

std::vector<float> MatrixView::Dequantize() const {
  std::vector<float> w(uint64_t(rows) * cols);
  Dequantize(w.data());
  return w;
}

void MatrixView::DequantizeRow(uint32_t row, float* out) const {
  switch (dtype) {
    case DType::kCQ:
      cact::DequantizeRow(blob, cq, codebook, row, out);
      return;
    case DType::kFP16: {
      const uint8_t* p = blob.data() + uint64_t(row) * cols * 2;
      for (uint32_t c = 0; c < cols; ++c) out[c] = LoadHalf(p + 2 * c);
      return;
    }
    case DType::kFP32: {
      const uint8_t* p = blob.data() + uint64_t(row) * cols * 4;
      for (uint32_t c = 0; c < cols; ++c) out[c] = LoadF32(p + 4 * c);
      return;
    }
    case DType::kRAW:
      break;
  }
  std::memset(out, 0, sizeof(float) * cols);
}

// ---------------------------------------------------------------------------------------
// Model

absl::StatusOr<std::unique_ptr<Model>> Model::Open(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(CactFile file, CactFile::Open(path));
  return FromFile(std::move(file));
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromFile(CactFile file) {
  const BlockSpec& block = file.geometry().block();  // static: outlives the move
  return FromFile(std::move(file), block);
}

absl::StatusOr<std::unique_ptr<Model>> Model::FromFile(CactFile file, const BlockSpec& block) {
  // A NaN norm would turn every logit into NaN and the sampler's argmax into token 0.
  CACT_RETURN_IF_ERROR(CheckFinite(file));
  std::unique_ptr<Model> m(new Model(std::move(file)));
  m->geometry_.block_spec = &block;
  CACT_RETURN_IF_ERROR(m->Build());
  return m;
}

const ProbeHeadWeights* Model::FindProbeHead(ProbeHead kind) const {
  for (const auto& h : heads_)
    if (h.spec.kind == kind) return &h;
  return nullptr;
}

absl::StatusOr<const TensorEntry*> Model::Entry(const std::string& name,
                                                const std::vector<uint32_t>& shape) const {
  const TensorEntry* t = file_.Find(name);
  if (!t) return FileError(path(), absl::StrCat("tensor ", name, " missing"));
  if (t->shape() != shape) {
    return FormatError(
        path(), absl::StrCat(name, ".shape"),
        kHeaderBytes + 4ull * file_.header().codebook_len + uint64_t(t->index) * kRecordBytes + 4,
        absl::StrCat("expected ", ShapeString(shape), ", found ", ShapeString(t->shape())));
  }
  return t;
}

absl::StatusOr<MatrixView> Model::Matrix(const std::string& name, uint32_t rows,
                                         uint32_t cols) const {
  CACT_ASSIGN_OR_RETURN(const TensorEntry* t, Entry(name, {rows, cols}));
  MatrixView v;
  v.entry = t;
  v.dtype = t->record.dtype;
  v.rows = rows;
  v.cols = cols;
  v.blob = file_.blob(*t);
  uint64_t need = 0;
  switch (v.dtype) {
    case DType::kCQ:
      v.cq = CqShape{rows, cols, t->record.group, t->record.bits};
      v.codebook = file_.CodebookFor(t->record.bits, t->record.group);
      need = v.cq.blob_bytes();
      if (const CqType* type = FindCqType(t->record.bits);
          !type || v.codebook.size() != type->levels)
        return FileError(path(), absl::StrCat(name, ": no codebook for bits ", t->record.bits));
      break;
    case DType::kFP16:
      need = uint64_t(rows) * cols * 2;
      break;
    case DType::kFP32:
      need = uint64_t(rows) * cols * 4;
      break;
    case DType::kRAW:
      return FileError(path(), absl::StrCat(name, ": a matrix cannot be RAW"));
  }
  if (v.blob.size() < need)
    return FileError(path(),
                     absl::StrFormat("%s: blob has %d bytes, needs %d", name, v.blob.size(), need));
  return v;
}

absl::StatusOr<std::vector<float>> Model::Vector(const std::string& name,
                                                 const std::vector<uint32_t>& shape) const {
  CACT_ASSIGN_OR_RETURN(const TensorEntry* t, Entry(name, shape));
  uint64_t n = 1;
  for (uint32_t s : shape) n *= s;
  std::span<const uint8_t> b = file_.blob(*t);
  std::vector<float> out(n);
  if (t->record.dtype == DType::kFP16 && b.size() >= n * 2) {
    for (uint64_t i = 0; i < n; ++i) out[i] = LoadHalf(b.data() + 2 * i);
  } else if (t->record.dtype == DType::kFP32 && b.size() >= n * 4) {
    for (uint64_t i = 0; i < n; ++i) out[i] = LoadF32(b.data() + 4 * i);
  } else {
    return FileError(
        path(), absl::StrCat(name, ": expected an FP16/FP32 vector of ", ShapeString(shape), " (",
                             DTypeName(t->record.dtype), ", ", b.size(), " bytes)"));
  }
  return out;
}

absl::Status Model::Build() {
  const Geometry& g = geometry();
  const uint32_t d = g.d_model, A = g.attn_dim(), K = g.kv_dim(), n = g.hada_n, m = g.mhc_lanes,
                 L = g.num_layers;
  // Geometry the forward pass relies on (a validated header should already hold these;
  // re-checked here because a wrong value would index outside a buffer).
  auto bad = [&](const std::string& what) { return FileError(path(), "geometry: " + what); };
  if (d == 0 || L == 0 || m == 0 || g.vocab == 0) return bad("zero dimension");
  if (g.num_kv_heads == 0 || g.num_heads % g.num_kv_heads)
    return bad("num_heads % num_kv_heads != 0");
  if (g.head_dim == 0 || g.head_dim % 2) return bad("head_dim must be even");
  if (!IsPowerOfTwo(n) || n < d) return bad("hada_n must be a power of two >= d_model");
  if (g.num_engram_sites > 4 || g.num_engram_orders > 4) return bad("too many engram sites/orders");
  if (g.num_engram_sites > 0) {
    if (g.num_engram_orders == 0 || g.num_engram_tables % g.num_engram_orders)
      return bad("num_engram_tables must be a multiple of num_engram_orders");
    if (g.engram_slots == 0) return bad("engram_slots is 0");
    for (uint32_t i = 0; i < g.num_engram_orders; ++i)
      if (g.engram_orders[i] == 0) return bad("engram order 0");
  }

  // The block description the forwards run: the reference walks its stage list, but the
  // fast path's two schedules are written in the Needle 2 order, so only that order runs;
  // both rotate with half-split RoPE.
  const BlockSpec& b = block();
  auto bad_block = [&](const std::string& what) {
    return FileError(path(), absl::StrCat("block ", b.name, ": ", what));
  };
  if (b.stages != kNeedle2Block.stages)
    return bad_block(absl::StrCat("stage order [", StageList(b), "] is not the engine's [",
                                  StageList(kNeedle2Block), "]"));
  if (b.rope_pairing != RopePairing::kHalfSplit)
    return bad_block("the engine implements only half-split RoPE pairing");
  if (b.hash_shift >= 32) return bad_block("engram hash_shift must be below 32");
  if (b.sinkhorn_iters < 0) return bad_block("negative sinkhorn_iters");

  CACT_ASSIGN_OR_RETURN(embedding_, Matrix("embedding", g.vocab, d));

  layers_.resize(L);
  for (uint32_t l = 0; l < L; ++l) {
    LayerWeights& w = layers_[l];
    const std::string p = absl::StrFormat("layer%02d.", l);
    CACT_ASSIGN_OR_RETURN(w.norm_in, Vector(p + "norm_in", {d}));
    CACT_ASSIGN_OR_RETURN(w.q_proj, Matrix(p + "q_proj", A, d));
    CACT_ASSIGN_OR_RETURN(w.k_proj, Matrix(p + "k_proj", K, d));
    CACT_ASSIGN_OR_RETURN(w.v_proj, Matrix(p + "v_proj", K, d));
    CACT_ASSIGN_OR_RETURN(w.q_norm, Vector(p + "q_norm", {g.head_dim}));
    CACT_ASSIGN_OR_RETURN(w.k_norm, Vector(p + "k_norm", {g.head_dim}));
    CACT_ASSIGN_OR_RETURN(w.gate_proj, Matrix(p + "gate_proj", A, d));
    CACT_ASSIGN_OR_RETURN(w.out_proj, Matrix(p + "out_proj", d, A));
    CACT_ASSIGN_OR_RETURN(w.post_norm, Vector(p + "post_norm", {d}));
    CACT_ASSIGN_OR_RETURN(std::vector<float> gate, Vector(p + "attn_gate", {1}));
    w.attn_gate = gate[0];
    CACT_ASSIGN_OR_RETURN(w.pre_hada, Vector(p + "pre_hada", {d}));
    CACT_ASSIGN_OR_RETURN(w.d1, Vector(p + "d1", {n}));
    CACT_ASSIGN_OR_RETURN(w.d2, Vector(p + "d2", {n}));
    CACT_ASSIGN_OR_RETURN(w.d3, Vector(p + "d3", {n}));
  }

  CACT_ASSIGN_OR_RETURN(mhc_.a_pre, Vector("mhc_a_pre", {L}));
  CACT_ASSIGN_OR_RETURN(mhc_.a_post, Vector("mhc_a_post", {L}));
  CACT_ASSIGN_OR_RETURN(mhc_.a_res, Vector("mhc_a_res", {L}));
  CACT_ASSIGN_OR_RETURN(mhc_.b_pre, Vector("mhc_b_pre", {L, m}));
  CACT_ASSIGN_OR_RETURN(mhc_.b_post, Vector("mhc_b_post", {L, m}));
  CACT_ASSIGN_OR_RETURN(mhc_.b_res, Vector("mhc_b_res", {L, m, m}));
  CACT_ASSIGN_OR_RETURN(mhc_.phi_pre, Matrix("mhc_phi_pre", L * m, m * d));
  CACT_ASSIGN_OR_RETURN(mhc_.phi_post, Matrix("mhc_phi_post", L * m, m * d));
  CACT_ASSIGN_OR_RETURN(mhc_.phi_res, Matrix("mhc_phi_res", L * m * m, m * d));

  const uint32_t T = g.num_engram_tables, S = g.engram_slots, s = g.engram_sub_dim;
  for (uint32_t i = 0; i < g.num_engram_sites; ++i) {
    EngramSiteWeights e;
    e.layer = g.engram_sites[i];
    if (e.layer >= L) return bad(absl::StrCat("engram site ", i, " at layer ", e.layer, " >= L"));
    if (layers_[e.layer].engram_site >= 0) return bad("two engram sites at one layer");
    layers_[e.layer].engram_site = int(i);
    const std::string p = absl::StrCat("engram", i, ".");
    CACT_ASSIGN_OR_RETURN(e.tables, Matrix(p + "tables", T * S, s));
    CACT_ASSIGN_OR_RETURN(e.key_proj, Matrix(p + "key_proj", d, T * s));
    CACT_ASSIGN_OR_RETURN(e.value_proj, Matrix(p + "value_proj", d, T * s));
    CACT_ASSIGN_OR_RETURN(e.taps, Vector(p + "taps", {g.engram_conv_taps, d}));
    engram_.push_back(std::move(e));
  }
  CACT_ASSIGN_OR_RETURN(final_norm_, Vector("final_norm", {d}));

  for (const ProbeHeadSpec& spec : file_.probe_heads()) {
    ProbeHeadWeights h;
    h.spec = spec;
    const std::string p = spec.name() + ".";
    CACT_ASSIGN_OR_RETURN(h.probes, Vector(p + "probes", {spec.probes, d}));
    CACT_ASSIGN_OR_RETURN(h.proj, Matrix(p + "proj", spec.out_dim, spec.probes * d));
    if (h.proj.is_cq())
      return FileError(path(), p + "proj: expected an FP16/FP32 matrix, found CQ");
    CACT_ASSIGN_OR_RETURN(h.bias, Vector(p + "bias", {spec.out_dim}));
    heads_.push_back(std::move(h));
  }
  return absl::OkStatus();
}

}  // namespace cact
