// A read-only view of an opened, validated .cact file, organised by role (layers, mHC,
// engram sites, probe heads). Packed weights are never copied: a matrix is a span into the
// mapped file plus its shape and codebook. Small FP16 vectors are decoded to float once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "quant/cq/cq.h"

namespace cact {

// One logical [rows, cols] matrix record. CQ records carry their shape and codebook;
// FP16/FP32 records (legal, unused by the official exporter) are handled by the same
// accessors so callers never special-case them.
struct MatrixView {
  const TensorEntry* entry = nullptr;
  DType dtype = DType::kCQ;
  uint32_t rows = 0, cols = 0;
  CqShape cq;                     // valid when dtype == kCQ
  std::span<const uint8_t> blob;  // the record's bytes inside the mapped file
  std::vector<float> codebook;    // CodebookFor(bits, group) when CQ

  bool is_cq() const { return dtype == DType::kCQ; }
  const std::string& name() const { return entry->name; }
  // Reference path: the whole matrix, row-major [rows, cols] float32.
  void Dequantize(float* out) const;
  std::vector<float> Dequantize() const;
  // One row (embedding / engram rows on demand), `cols` floats.
  void DequantizeRow(uint32_t row, float* out) const;
};

struct LayerWeights {
  std::vector<float> norm_in;         // [d]
  MatrixView q_proj;                  // [A, d]
  MatrixView k_proj, v_proj;          // [K, d]
  std::vector<float> q_norm, k_norm;  // [head_dim]
  MatrixView gate_proj;               // [A, d]
  MatrixView out_proj;                // [d, A]
  std::vector<float> post_norm;       // [d]
  float attn_gate = 0;                // raw parameter; the residual uses sigmoid(attn_gate)
  std::vector<float> pre_hada;        // [d]
  std::vector<float> d1, d2, d3;      // [hada_n]
  int engram_site = -1;               // index into Model::engram_sites(), -1 if none
};

struct MhcWeights {
  std::vector<float> a_pre, a_post, a_res;  // [L]
  std::vector<float> b_pre, b_post;         // [L*m]
  std::vector<float> b_res;                 // [L*m*m]
  MatrixView phi_pre, phi_post;             // [L*m, m*d]
  MatrixView phi_res;                       // [L*m*m, m*d]
};

struct EngramSiteWeights {
  uint32_t layer = 0;
  MatrixView tables;        // [T*S, s], row t*S + slot
  MatrixView key_proj;      // [d, T*s]
  MatrixView value_proj;    // [d, T*s]
  std::vector<float> taps;  // [taps, d], taps[j*d + c] multiplies v[t - dilation*j]
};

struct ProbeHeadWeights {
  ProbeHeadSpec spec;
  std::vector<float> probes;  // [P, d]
  MatrixView proj;            // [out, P*d] FP16/FP32, read row by row on use (1 MB as float)
  std::vector<float> bias;    // [out]
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Open(const std::string& path);
  // Takes ownership of an already opened file and checks every record the forward
  // pass relies on (dtype, shape, geometry consistency).
  static absl::StatusOr<std::unique_ptr<Model>> FromFile(CactFile file);
  // The same with another block description (formats/needle/block.h) than the file's: how
  // the tests check that every executor follows a change to it.
  static absl::StatusOr<std::unique_ptr<Model>> FromFile(CactFile file, const BlockSpec& block);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const CactFile& file() const { return file_; }
  const Geometry& geometry() const { return geometry_; }
  const BlockSpec& block() const { return geometry_.block(); }
  const std::string& path() const { return file_.path(); }

  // Geometry shorthands.
  uint32_t vocab() const { return geometry().vocab; }
  uint32_t d_model() const { return geometry().d_model; }
  uint32_t num_layers() const { return geometry().num_layers; }
  uint32_t num_heads() const { return geometry().num_heads; }
  uint32_t num_kv_heads() const { return geometry().num_kv_heads; }
  uint32_t head_dim() const { return geometry().head_dim; }
  uint32_t lanes() const { return geometry().mhc_lanes; }
  uint32_t hada_n() const { return geometry().hada_n; }
  uint32_t max_seq_len() const { return geometry().max_seq_len; }
  uint32_t kv_window() const { return geometry().kv_window; }

  const MatrixView& embedding() const { return embedding_; }  // [vocab, d], tied output
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const LayerWeights& layer(uint32_t l) const { return layers_[l]; }
  const MhcWeights& mhc() const { return mhc_; }
  const std::vector<EngramSiteWeights>& engram_sites() const { return engram_; }
  const std::vector<float>& final_norm() const { return final_norm_; }
  const std::vector<ProbeHeadWeights>& probe_heads() const { return heads_; }
  const ProbeHeadWeights* FindProbeHead(ProbeHead kind) const;

 private:
  explicit Model(CactFile file) : file_(std::move(file)), geometry_(file_.geometry()) {}
  absl::Status Build();
  absl::StatusOr<const TensorEntry*> Entry(const std::string& name,
                                           const std::vector<uint32_t>& shape) const;
  absl::StatusOr<MatrixView> Matrix(const std::string& name, uint32_t rows, uint32_t cols) const;
  absl::StatusOr<std::vector<float>> Vector(const std::string& name,
                                            const std::vector<uint32_t>& shape) const;

  CactFile file_;
  Geometry geometry_;  // the file's, with its block description
  MatrixView embedding_;
  std::vector<LayerWeights> layers_;
  MhcWeights mhc_;
  std::vector<EngramSiteWeights> engram_;
  std::vector<float> final_norm_;
  std::vector<ProbeHeadWeights> heads_;
};

}  // namespace cact
