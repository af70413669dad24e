#include "engine/forward_state_bytes.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "lib/status.h"

namespace cact::state_bytes {

void PutTokens(ByteWriter& w, std::span<const int32_t> tokens) {
  w.Put(uint32_t(tokens.size()));
  w.PutArray(tokens);
}

absl::Status GetTokens(ByteReader& r, const Model& model, std::vector<int32_t>* tokens) {
  const uint64_t at = r.offset();
  uint32_t n = 0;
  CACT_RETURN_IF_ERROR(r.Get("token count", &n));
  if (n > model.max_seq_len())
    return r.Bad("token count", at,
                 absl::StrFormat("%d tokens, more than max_seq_len %d", n, model.max_seq_len()));
  tokens->resize(n);
  const uint64_t ids_at = r.offset();
  CACT_RETURN_IF_ERROR(r.GetArray("token ids", std::span<int32_t>(*tokens)));
  for (size_t i = 0; i < n; ++i) {
    if ((*tokens)[i] < 0 || uint32_t((*tokens)[i]) >= model.vocab())
      return r.Bad(
          "token ids", ids_at + 4 * i,
          absl::StrFormat("id %d outside the vocabulary [0, %d)", (*tokens)[i], model.vocab()));
  }
  return absl::OkStatus();
}

void PutFloats(ByteWriter& w, std::span<const float> v) { w.PutArray(v); }

absl::Status GetFloats(ByteReader& r, std::string_view field, size_t n, std::vector<float>* v) {
  const uint64_t at = r.offset();
  v->resize(n);
  CACT_RETURN_IF_ERROR(r.GetArray(field, std::span<float>(*v)));
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite((*v)[i]))
      return r.Bad(field, at + 4 * i, absl::StrFormat("non-finite value %g", (*v)[i]));
  }
  return absl::OkStatus();
}

void PutHidden(ByteWriter& w, const HiddenRecord& hidden, bool keep_hidden, bool with_rows) {
  const std::vector<float>& h = hidden.by_position();
  if (!keep_hidden || h.empty()) {
    w.Put(uint8_t(0));
  } else if (!with_rows) {
    w.Put(uint8_t(2));
  } else {
    w.Put(uint8_t(1));
    PutFloats(w, h);
  }
}

absl::Status GetHidden(ByteReader& r, bool keep_hidden, size_t positions, const Model& model,
                       HiddenRecord* hidden) {
  const uint64_t at = r.offset();
  uint8_t has = 0;
  CACT_RETURN_IF_ERROR(r.Get("hidden flag", &has));
  const bool expected = keep_hidden && positions > 0;
  hidden->Clear();
  if (expected && has == 2) {  // left out: recorded from `positions` on
    hidden->set_first(uint32_t(positions));
    return absl::OkStatus();
  }
  if (has != uint8_t(expected))
    return r.Bad("hidden flag", at,
                 absl::StrFormat("%d, expected %s (hidden states %s by this forward)", has,
                                 expected ? "1 or 2" : "0",
                                 keep_hidden ? "recorded" : "not recorded"));
  if (!expected) return absl::OkStatus();
  return GetFloats(r, "hidden states", positions * model.num_layers() * model.d_model(),
                   &hidden->by_position());
}

void PutProbeBlock(ByteWriter& w, const ProbeBlock& block) {
  w.Put(uint32_t(block.heads.size()));
  for (const std::vector<ProbeBlock::Probe>& head : block.heads) {
    w.Put(uint32_t(head.size()));
    for (const ProbeBlock::Probe& p : head) {
      w.Put(p.max);
      w.Put(p.sum);
      PutFloats(w, p.acc);
    }
  }
}

absl::Status GetProbeBlock(ByteReader& r, const Model& model, ProbeBlock* block) {
  const auto& heads = model.probe_heads();
  const uint64_t at = r.offset();
  uint32_t n = 0;
  CACT_RETURN_IF_ERROR(r.Get("probe heads", &n));
  if (n != heads.size())
    return r.Bad("probe heads", at, absl::StrFormat("%d, the model has %d", n, heads.size()));
  block->heads.assign(n, {});
  for (uint32_t h = 0; h < n; ++h) {
    const uint64_t probes_at = r.offset();
    uint32_t probes = 0;
    CACT_RETURN_IF_ERROR(r.Get("probes", &probes));
    if (probes != heads[h].spec.probes)
      return r.Bad("probes", probes_at,
                   absl::StrFormat("%d, head %d has %d", probes, h, heads[h].spec.probes));
    block->heads[h].resize(probes);
    for (ProbeBlock::Probe& p : block->heads[h]) {
      const uint64_t max_at = r.offset();
      CACT_RETURN_IF_ERROR(r.Get("probe max", &p.max));
      CACT_RETURN_IF_ERROR(r.Get("probe sum", &p.sum));
      CACT_RETURN_IF_ERROR(GetFloats(r, "probe sums", model.d_model(), &p.acc));
      const bool empty = p.max == -INFINITY;
      bool zeros = p.sum == 0;
      for (float v : p.acc) zeros = zeros && v == 0;
      if (std::isnan(p.max) || p.max == INFINITY || !std::isfinite(p.sum) || p.sum < 0 ||
          (empty && !zeros) || (!empty && p.sum < 1))
        return r.Bad("probe max", max_at,
                     absl::StrFormat("max %g and sum %g are not a pool", p.max, p.sum));
    }
  }
  return absl::OkStatus();
}

}  // namespace cact::state_bytes
