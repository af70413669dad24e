#include "quant/scheme_inference.h"

#include <map>
#include <set>
#include <vector>

#include "quant/scheme.h"

namespace cact {
namespace {

// Candidate prefixes of a scheme-match name at '.' and '_' boundaries, shortest first,
// plus the bare site family ("engram" for "engram1.tables").
std::vector<std::string> Prefixes(const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 1; i <= name.size(); ++i)
    if (i == name.size() || name[i] == '.' || name[i] == '_') out.push_back(name.substr(0, i));
  size_t digit = name.find_first_of("0123456789");
  if (digit != std::string::npos && digit > 0) out.insert(out.begin(), name.substr(0, digit));
  return out;
}

}  // namespace

std::string InferScheme(const CactFile& file) {
  std::vector<std::pair<std::string, uint32_t>> cq;  // (original name, bits)
  std::map<uint32_t, int> count;
  for (const TensorEntry& t : file.tensors()) {
    if (!t.is_cq()) continue;
    cq.emplace_back(t.name, t.record.bits);
    ++count[t.record.bits];
  }
  if (cq.empty()) return "";
  Scheme s;
  s.default_bits = 0;
  int best = -1;
  for (auto [bits, n] : count)
    if (n > best) best = n, s.default_bits = bits;
  // Greedy: for each record the current rules get wrong, add the shortest prefix whose
  // members all share that record's width.
  for (const auto& [name, bits] : cq) {
    if (s.BitsFor(name) == bits) continue;
    std::string match = SchemeMatchName(name);
    for (const std::string& p : Prefixes(match)) {
      bool uniform = true;
      for (const auto& [other, obits] : cq) {
        if (SchemeMatchName(other).rfind(p, 0) == 0 && obits != bits) {
          uniform = false;
          break;
        }
      }
      if (uniform) {
        s.rules.emplace_back(p, bits);
        break;
      }
    }
    if (s.BitsFor(name) != bits) s.rules.emplace_back(match, bits);  // exact name as last resort
  }
  return s.ToString();
}

}  // namespace cact
