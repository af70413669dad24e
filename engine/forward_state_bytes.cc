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

void PutHidden(ByteWriter& w, const HiddenRecord& hidden) {
  const std::vector<float>& h = hidden.by_position();
  w.Put(uint8_t(h.empty() ? 0 : 1));
  PutFloats(w, h);
}

absl::Status GetHidden(ByteReader& r, bool keep_hidden, size_t positions, const Model& model,
                       HiddenRecord* hidden) {
  const uint64_t at = r.offset();
  uint8_t has = 0;
  CACT_RETURN_IF_ERROR(r.Get("hidden flag", &has));
  const bool expected = keep_hidden && positions > 0;
  if (has != uint8_t(expected))
    return r.Bad("hidden flag", at,
                 absl::StrFormat("%d, expected %d (hidden states %s by this forward)", has,
                                 int(expected), keep_hidden ? "recorded" : "not recorded"));
  hidden->Clear();
  if (!expected) return absl::OkStatus();
  return GetFloats(r, "hidden states", positions * model.num_layers() * model.d_model(),
                   &hidden->by_position());
}

}  // namespace cact::state_bytes
