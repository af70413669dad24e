// The official fixtures' decode cases: sequences s0, s1, s2, and s2 again under a sliding
// window with and without attention sinks. suffix() names the fixture arrays of a case
// (logits_<suffix>.npy, hidden_<suffix>.npy).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace cact::testing {

struct DecodeCase {
  std::string kase, seq;
  uint32_t window = 0, sink = 0;
  std::string suffix() const {
    return window ? seq + "_w" + std::to_string(window) + "p" + std::to_string(sink) : seq;
  }
};

inline void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.kase << "/" << c.suffix(); }

inline std::vector<DecodeCase> DecodeCasesOf(const std::string& kase) {
  return {{kase, "s0"},        {kase, "s1"},        {kase, "s2"},
          {kase, "s2", 16, 4}, {kase, "s2", 16, 0}, {kase, "s2", 8, 2}};
}

}  // namespace cact::testing
