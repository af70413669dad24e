#include "tools/common/token_list.h"

#include <charconv>
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace cact::tools {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseTokenIds(std::string_view text) {
  std::vector<int32_t> ids;
  size_t at = 0, position = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = TrimBlanks(text.substr(at, end - at));
    at = end + 1;
    ++position;
    if (item.empty()) continue;
    std::string_view digits = item;
    if (digits.size() > 1 && digits.front() == '+') digits.remove_prefix(1);  // "+17" is 17
    int64_t id = 0;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (ec != std::errc() || p != digits.data() + digits.size())
      return absl::InvalidArgumentError(absl::StrFormat(
          "--tokens: item %u '%s' is not an integer token id", position, std::string(item)));
    if (id < 0 || id > INT32_MAX)
      return absl::InvalidArgumentError(
          absl::StrFormat("--tokens: item %u '%s' is not a valid id (ids are 0..2^31-1)", position,
                          std::string(item)));
    ids.push_back(int32_t(id));
  }
  if (ids.empty()) return absl::InvalidArgumentError("--tokens: no token ids");
  return ids;
}

}  // namespace cact::tools
