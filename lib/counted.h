// "1 step", "2 steps": counts in messages with the noun in the right number.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cact {

// `noun` is the singular; the plural adds "s".
inline std::string Counted(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}
// For a noun whose plural is not noun + "s" ("query", "queries").
inline std::string Counted(uint64_t n, std::string_view singular, std::string_view plural) {
  return std::to_string(n) + " " + std::string(n == 1 ? singular : plural);
}

}  // namespace cact
