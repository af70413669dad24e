#include "lib/status.h"

namespace cact {

absl::Status FormatError(std::string_view file, std::string_view field, uint64_t offset,
                         std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s at offset %d: %s", file, field, offset, what));
}

absl::Status FileError(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: %s", file, what));
}

}  // namespace cact
