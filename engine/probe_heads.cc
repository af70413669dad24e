#include "engine/probe_heads.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "engine/ops.h"

namespace cact {
namespace {

// One head: softmax(cell . probe / sqrt(d)) pooling per probe, flattened, then proj + bias.
std::vector<float> RunHead(const ProbeHeadWeights& head, const std::vector<const float*>& cells,
                           uint32_t d) {
  const uint32_t P = head.spec.probes;
  const float inv_sqrt_d = 1.0f / std::sqrt(float(d));
  std::vector<float> pooled(size_t(P) * d, 0.0f), score(cells.size());
  for (uint32_t p = 0; p < P; ++p) {
    const float* probe = &head.probes[size_t(p) * d];
    float mx = -INFINITY;
    for (size_t c = 0; c < cells.size(); ++c) {
      score[c] = ops::Dot(cells[c], probe, d) * inv_sqrt_d;
      mx = std::max(mx, score[c]);
    }
    float sum = 0;
    for (float& s : score) sum += (s = std::exp(s - mx));
    float* out = &pooled[size_t(p) * d];
    for (size_t c = 0; c < cells.size(); ++c) {
      const float w = score[c] / sum;
      for (uint32_t i = 0; i < d; ++i) out[i] += w * cells[c][i];
    }
  }
  std::vector<float> y(head.spec.out_dim);
  std::vector<float> row(pooled.size());
  for (size_t r = 0; r < y.size(); ++r) {
    head.proj.DequantizeRow(uint32_t(r), row.data());
    y[r] = ops::Dot(row.data(), pooled.data(), pooled.size());
  }
  for (size_t i = 0; i < y.size(); ++i) y[i] += head.bias[i];
  return y;
}

}  // namespace

absl::StatusOr<ProbeOutputs> ComputeProbeHeads(const Model& model, std::span<const int32_t> tokens,
                                               std::span<const float> hidden, int32_t pad_id,
                                               HiddenLayout layout) {
  const uint32_t d = model.d_model(), L = model.num_layers();
  const size_t T = tokens.size();
  if (hidden.size() != size_t(L) * T * d)
    return absl::InvalidArgumentError(
        absl::StrFormat("probe heads: hidden has %d values, expected L*T*d = %d", hidden.size(),
                        size_t(L) * T * d));
  ProbeOutputs out;
  if (model.probe_heads().empty()) return out;

  std::vector<float> embeddings(T * d);
  std::vector<const float*> cells;
  const float scale = std::sqrt(float(d));
  for (size_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || uint32_t(tokens[t]) >= model.vocab())
      return absl::InvalidArgumentError(absl::StrFormat("probe heads: bad token %d", tokens[t]));
    if (tokens[t] == pad_id) continue;
    float* e = &embeddings[t * d];
    model.embedding().DequantizeRow(uint32_t(tokens[t]), e);
    for (uint32_t i = 0; i < d; ++i) e[i] *= scale;
    cells.push_back(e);
    for (uint32_t l = 0; l < L; ++l)
      cells.push_back(
          &hidden[(layout == HiddenLayout::kByLayer ? size_t(l) * T + t : t * L + l) * d]);
  }
  if (cells.empty()) return absl::InvalidArgumentError("probe heads: every token is padding");

  for (const ProbeHeadWeights& head : model.probe_heads()) {
    std::vector<float> y = RunHead(head, cells, d);
    if (head.spec.kind == ProbeHead::kContrastive) {
      const float norm = std::sqrt(ops::Dot(y.data(), y.data(), y.size()));
      for (float& v : y) v /= std::max(norm, 1e-12f);
      out.retrieval = std::move(y);
    } else {
      out.has_confidence = true;
      out.confidence = y.empty() ? 0.0f : y[0];
    }
  }
  return out;
}

}  // namespace cact
