// Bit-width schemes: "embedding=4,mhc=4,default=2". Comma list of prefix=bits; the longest
// prefix of the scheme-match name (layout.h SchemeMatchName) wins; `default` is required;
// widths 2, 3, 4 and 1.58 (ternary, record bits 5).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"  // WidthName: "2", "3", "4" or "1.58" for record bits

namespace cact {

struct Scheme {
  std::vector<std::pair<std::string, uint32_t>> rules;  // prefix -> record bits (5 = ternary)
  uint32_t default_bits = 2;
  // Record bits for a canonical tensor name.
  uint32_t BitsFor(const std::string& canonical_name) const;
  // The same for a name already in match form (SchemeMatchName): the longest rule prefix.
  uint32_t BitsForMatchName(const std::string& match_name) const;
  std::string ToString() const;  // canonical text, e.g. "embedding=4,mhc=4,default=2"
};

inline constexpr const char* kDefaultScheme = "embedding=4,mhc=4,default=2";
absl::StatusOr<Scheme> ParseScheme(const std::string& text);
// Error naming every rule that matches none of `matrix_names` (canonical names of the
// model's CQ matrices): a mistyped prefix would otherwise silently leave those tensors at
// the default width.
absl::Status CheckRulesMatch(const Scheme& scheme, const std::vector<std::string>& matrix_names);

}  // namespace cact
