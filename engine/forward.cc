#include "engine/forward.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace cact {

Forward::~Forward() = default;
Forward::State::~State() = default;

std::unique_ptr<Forward::State> Forward::Save() const { return nullptr; }

absl::Status Forward::Restore(const State&) {
  return absl::UnimplementedError(name() + ": this forward path cannot restore a saved state");
}

absl::StatusOr<std::string> Forward::StateBytes(const State&, bool) const {
  return absl::UnimplementedError(name() + ": this forward path cannot write its state");
}

absl::StatusOr<std::unique_ptr<Forward::State>> Forward::StateFromBytes(std::string_view,
                                                                        const std::string&,
                                                                        uint64_t) const {
  return absl::UnimplementedError(name() + ": this forward path cannot read a state");
}

absl::Status CheckFeed(const Model& model, uint32_t position, std::span<const int32_t> tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= model.vocab())
      return absl::InvalidArgumentError(absl::StrFormat(
          "token %d at index %d is not a valid id (vocab %d)", tokens[i], i, model.vocab()));
  }
  if (uint64_t(position) + tokens.size() > model.max_seq_len())
    return absl::OutOfRangeError(
        absl::StrFormat("sequence of %d tokens exceeds the model's max_seq_len %d",
                        uint64_t(position) + tokens.size(), model.max_seq_len()));
  return absl::OkStatus();
}

absl::Status BeginFeed(const Model& model, uint32_t position, std::span<const int32_t> tokens,
                       std::vector<float>* logits, bool all_positions) {
  if (auto st = CheckFeed(model, position, tokens); !st.ok()) return st;
  const size_t n = tokens.size();
  if (logits) logits->assign((all_positions ? n : (n ? 1 : 0)) * model.vocab(), 0.0f);
  return absl::OkStatus();
}

const std::vector<float>& HiddenRecord::ByLayer(size_t L, size_t d) const {
  if (by_layer_.size() != by_position_.size()) {
    const size_t T = L && d ? by_position_.size() / (L * d) : 0;
    by_layer_.resize(by_position_.size());
    for (size_t t = 0; t < T; ++t)
      for (size_t l = 0; l < L; ++l)
        std::memcpy(&by_layer_[(l * T + t) * d], &by_position_[(t * L + l) * d], d * sizeof(float));
  }
  return by_layer_;
}

}  // namespace cact
