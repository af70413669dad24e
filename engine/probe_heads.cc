#include "engine/probe_heads.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "engine/ops.h"

namespace cact {
namespace {

// The cells of `tokens` (padding skipped): sqrt(d) * embedding, then the lane mean after each
// layer. `embeddings` holds the scaled embedding rows the cells point at.
absl::Status CheckHiddenSize(const Model& model, size_t T, std::span<const float> hidden) {
  const size_t want = size_t(model.num_layers()) * T * model.d_model();
  if (hidden.size() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "probe heads: hidden has %d values, expected L*T*d = %d", hidden.size(), want));
}

absl::Status BuildCells(const Model& model, std::span<const int32_t> tokens,
                        std::span<const float> hidden, int32_t pad_id, HiddenLayout layout,
                        std::vector<float>* embeddings, std::vector<const float*>* cells) {
  const uint32_t d = model.d_model(), L = model.num_layers();
  const size_t T = tokens.size();
  if (absl::Status st = CheckHiddenSize(model, T, hidden); !st.ok()) return st;
  // One scaled embedding row per distinct token (decoding a row is the costly part).
  std::unordered_map<int32_t, size_t> row_of;
  for (size_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || uint32_t(tokens[t]) >= model.vocab())
      return absl::InvalidArgumentError(absl::StrFormat("probe heads: bad token %d", tokens[t]));
    if (tokens[t] != pad_id) row_of.emplace(tokens[t], row_of.size());
  }
  embeddings->assign(row_of.size() * d, 0.0f);
  const float scale = std::sqrt(float(d));
  for (const auto& [token, row] : row_of) {
    float* e = &(*embeddings)[row * d];
    model.embedding().DequantizeRow(uint32_t(token), e);
    for (uint32_t i = 0; i < d; ++i) e[i] *= scale;
  }
  for (size_t t = 0; t < T; ++t) {
    if (tokens[t] == pad_id) continue;
    cells->push_back(&(*embeddings)[row_of.at(tokens[t]) * d]);
    for (uint32_t l = 0; l < L; ++l)
      cells->push_back(
          &hidden[(layout == HiddenLayout::kByLayer ? size_t(l) * T + t : t * L + l) * d]);
  }
  return absl::OkStatus();
}

// proj . pooled + bias, as the head's output.
std::vector<float> Project(const ProbeHeadWeights& head, const std::vector<float>& pooled) {
  std::vector<float> y(head.spec.out_dim);
  std::vector<float> row(pooled.size());
  for (size_t r = 0; r < y.size(); ++r) {
    head.proj.DequantizeRow(uint32_t(r), row.data());
    y[r] = ops::Dot(row.data(), pooled.data(), pooled.size());
  }
  for (size_t i = 0; i < y.size(); ++i) y[i] += head.bias[i];
  return y;
}

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
  return Project(head, pooled);
}

// The head's output as ComputeProbeHeads reports it.
void Store(const ProbeHeadWeights& head, std::vector<float> y, ProbeOutputs* out) {
  if (head.spec.kind == ProbeHead::kContrastive) {
    const float norm = std::sqrt(ops::Dot(y.data(), y.data(), y.size()));
    for (float& v : y) v /= std::max(norm, 1e-12f);
    out->retrieval = std::move(y);
  } else {
    out->has_confidence = true;
    out->confidence = y.empty() ? 0.0f : y[0];
  }
}

// Pools probes [p0, p1) over every cell, each cell read once per pass (the cells of a long
// prompt do not stay in cache; the probes and their sums do). Each probe's arithmetic and
// its order over the cells are those of one probe at a time.
void PoolProbes(const std::vector<const float*>& cells, const std::vector<const float*>& probes,
                const std::vector<ProbeBlock::Probe*>& pools, size_t p0, size_t p1, uint32_t d) {
  const float inv_sqrt_d = 1.0f / std::sqrt(float(d));
  const size_t n = p1 - p0;
  std::vector<float> score(cells.size() * n);
  for (size_t c = 0; c < cells.size(); ++c)
    for (size_t p = p0; p < p1; ++p) {
      float& s = score[c * n + (p - p0)];
      s = ops::Dot(cells[c], probes[p], d) * inv_sqrt_d;
      pools[p]->max = std::max(pools[p]->max, s);
    }
  for (size_t c = 0; c < cells.size(); ++c)
    for (size_t p = p0; p < p1; ++p) {
      ProbeBlock::Probe& b = *pools[p];
      const float e = std::exp(score[c * n + (p - p0)] - b.max);
      b.sum += e;
      for (uint32_t i = 0; i < d; ++i) b.acc[i] += e * cells[c][i];
    }
}

}  // namespace

absl::StatusOr<ProbeOutputs> ComputeProbeHeads(const Model& model, std::span<const int32_t> tokens,
                                               std::span<const float> hidden, int32_t pad_id,
                                               HiddenLayout layout) {
  ProbeOutputs out;
  if (model.probe_heads().empty()) {
    if (absl::Status st = CheckHiddenSize(model, tokens.size(), hidden); !st.ok()) return st;
    return out;
  }
  std::vector<float> embeddings;
  std::vector<const float*> cells;
  if (absl::Status st = BuildCells(model, tokens, hidden, pad_id, layout, &embeddings, &cells);
      !st.ok())
    return st;
  if (cells.empty()) return absl::InvalidArgumentError("probe heads: every token is padding");
  for (const ProbeHeadWeights& head : model.probe_heads())
    Store(head, RunHead(head, cells, model.d_model()), &out);
  return out;
}

absl::StatusOr<ProbeBlock> PoolProbeBlock(const Model& model, std::span<const int32_t> tokens,
                                          std::span<const float> hidden, int32_t pad_id,
                                          HiddenLayout layout, int threads) {
  std::vector<float> embeddings;
  std::vector<const float*> cells;
  if (absl::Status st = BuildCells(model, tokens, hidden, pad_id, layout, &embeddings, &cells);
      !st.ok())
    return st;
  const uint32_t d = model.d_model();
  ProbeBlock block;
  std::vector<const float*> probe_vectors;
  std::vector<ProbeBlock::Probe*> pools;
  for (const ProbeHeadWeights& head : model.probe_heads())
    block.heads.emplace_back(head.spec.probes);
  for (size_t h = 0; h < block.heads.size(); ++h) {
    const ProbeHeadWeights& head = model.probe_heads()[h];
    for (uint32_t p = 0; p < head.spec.probes; ++p) {
      probe_vectors.push_back(&head.probes[size_t(p) * d]);
      pools.push_back(&block.heads[h][p]);
      pools.back()->acc.assign(d, 0.0f);
    }
  }
  // Probes are independent: threads take contiguous shares of them (the same bits for any
  // count), when the block is big enough to pay for starting one.
  const size_t P = pools.size();
  const size_t work = cells.size() * P * d;
  const size_t n = std::clamp<size_t>(work >= (size_t(1) << 20) ? size_t(threads) : 1, 1,
                                      std::max<size_t>(P, 1));
  auto share = [&](size_t k) {
    PoolProbes(cells, probe_vectors, pools, P * k / n, P * (k + 1) / n, d);
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < n; ++k) helpers.emplace_back(share, k);
  share(0);
  for (std::thread& t : helpers) t.join();
  return block;
}

absl::StatusOr<ProbeOutputs> FinishProbeBlocks(const Model& model,
                                               std::span<const ProbeBlock> blocks) {
  ProbeOutputs out;
  const uint32_t d = model.d_model();
  const auto& heads = model.probe_heads();
  for (const ProbeBlock& b : blocks) {
    if (b.heads.size() != heads.size())
      return absl::InvalidArgumentError("probe heads: a block pooled for other heads");
    for (size_t h = 0; h < heads.size(); ++h)
      if (b.heads[h].size() != heads[h].spec.probes)
        return absl::InvalidArgumentError("probe heads: a block pooled for other probes");
  }
  for (size_t h = 0; h < heads.size(); ++h) {
    const uint32_t P = heads[h].spec.probes;
    std::vector<float> pooled(size_t(P) * d, 0.0f);
    for (uint32_t p = 0; p < P; ++p) {
      float mx = -INFINITY;
      for (const ProbeBlock& b : blocks) mx = std::max(mx, b.heads[h][p].max);
      if (mx == -INFINITY) return absl::InvalidArgumentError("probe heads: every token is padding");
      float sum = 0;
      for (const ProbeBlock& b : blocks) {
        const ProbeBlock::Probe& q = b.heads[h][p];
        if (q.max == -INFINITY) continue;
        sum += q.sum * std::exp(q.max - mx);
      }
      float* o = &pooled[size_t(p) * d];
      for (const ProbeBlock& b : blocks) {
        const ProbeBlock::Probe& q = b.heads[h][p];
        if (q.max == -INFINITY) continue;
        const float w = std::exp(q.max - mx) / sum;
        for (uint32_t i = 0; i < d; ++i) o[i] += w * q.acc[i];
      }
    }
    std::vector<float> y = Project(heads[h], pooled);
    for (float v : y)
      if (!std::isfinite(v))  // a pool from a damaged or crafted prompt cache
        return absl::DataLossError("probe heads: the pooled blocks give a non-finite output");
    Store(heads[h], std::move(y), &out);
  }
  return out;
}

}  // namespace cact
