#include <charconv>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "quant/build.h"
#include "quant/cq/codebook.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {
namespace {

// Shortest decimal that reads back to the same value (Python's repr).
template <class T>
std::string Shortest(T v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

int RunCodebook(const Options& o) {
  Reporter rep(o);
  const CqType* type = FindCqTypeByWidth(o.bits);
  if (!type)
    return rep.Fail(
        absl::InvalidArgumentError("--bits " + o.bits + " is not one of 2, 3, 4, 1.58"));
  const uint32_t bits = type->bits;
  const uint32_t group = o.group.value_or(0);  // required on the command line
  if (!IsValidCqGroup(group))
    return rep.Fail(absl::InvalidArgumentError(
        absl::StrFormat("--group %d is not a power of two in [8, 65536]", group)));
  const std::vector<float> cb = CqCodebook(bits, group);
  const std::vector<double>& unit = UnitCodebook(bits);
  std::vector<std::string> hex, dec, unit_dec;
  for (size_t i = 0; i < cb.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &cb[i], 4);
    hex.push_back(absl::StrFormat("0x%08x", u));
    dec.push_back(absl::StrFormat("%.9g", double(cb[i])));  // as codebooks.json writes them
    unit_dec.push_back(Shortest(unit[i]));
  }
  const std::string how = bits == kTernaryBits
                              ? absl::StrFormat("ternary: float32({-%.8g, 0, %.8g} / sqrt(group))",
                                                kTernaryLevel, kTernaryLevel)
                              : "Lloyd-Max on sorted RandomState(0).randn(400000), 200 iterations; "
                                "float32(levels / sqrt(group))";
  if (o.json) {
    nlohmann::ordered_json j;
    j["bits"] = type->width;
    j["record_bits"] = bits;
    j["group"] = group;
    j["method"] = how;
    j["values"] = cb;
    j["hex"] = hex;
    j["decimal"] = dec;
    j["unit_float64"] = unit_dec;
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("%s codebook, group %u (%s)\n", type->name, group, how.c_str());
  std::printf("  %-5s  %-16s  %-10s  %s\n", "index", "float32", "hex", "unit level (float64)");
  for (size_t i = 0; i < cb.size(); ++i)
    std::printf("  %-5zu  %-16s  %-10s  %s\n", i, dec[i].c_str(), hex[i].c_str(),
                unit_dec[i].c_str());
  return 0;
}

}  // namespace cact::quant_tool
