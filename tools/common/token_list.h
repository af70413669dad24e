// The `--tokens` syntax every tool accepts: token ids separated by commas, e.g. "2,17,40".
// Each item is a non-negative decimal integer below 2^31 (an optional leading '+'); blanks around
// an item are ignored, and so are empty items ("2,,17" and a trailing comma). At least one id.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cact::tools {

// InvalidArgument naming the first bad item and its 1-based position, or "no token ids".
// (No vocabulary check: the model checks the ids against its vocabulary.)
absl::StatusOr<std::vector<int32_t>> ParseTokenIds(std::string_view text);

}  // namespace cact::tools
