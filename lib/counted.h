// "1 step", "2 steps": counts in messages with the noun in the right number.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace cact {

// `noun` is the singular; the plural adds "s" (every noun the tools count does).
inline std::string Counted(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

}  // namespace cact
