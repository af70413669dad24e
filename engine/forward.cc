#include "engine/forward.h"

#include "absl/strings/str_format.h"

namespace cact {

Forward::~Forward() = default;

absl::Status CheckFeed(const Model& model, uint32_t position, std::span<const int32_t> tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= model.vocab())
      return absl::InvalidArgumentError(absl::StrFormat(
          "token %d at index %d is not a valid id (vocab %d)", tokens[i], i, model.vocab()));
  }
  if (uint64_t(position) + tokens.size() > model.max_seq_len())
    return absl::OutOfRangeError(absl::StrFormat(
        "sequence of %d tokens exceeds the model's max_seq_len %d",
        uint64_t(position) + tokens.size(), model.max_seq_len()));
  return absl::OkStatus();
}

}  // namespace cact
