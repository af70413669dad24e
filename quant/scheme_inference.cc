#include "quant/scheme_inference.h"

#include <map>
#include <vector>

#include "quant/scheme.h"

namespace cact {
namespace {

// Candidate prefixes of a match name at '.' and '_' boundaries, shortest first, plus the
// bare family before the first digit ("engram" for "engram1.tables").
std::vector<std::string> Prefixes(const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 1; i <= name.size(); ++i)
    if (i == name.size() || name[i] == '.' || name[i] == '_') out.push_back(name.substr(0, i));
  size_t digit = name.find_first_of("0123456789");
  if (digit != std::string::npos && digit > 0) out.insert(out.begin(), name.substr(0, digit));
  return out;
}

// (match name, bits) of every CQ record. Layers are folded into `attn.` for generation 2
// (its scheme language) and, for generation 3, only where the layers agree.
std::vector<std::pair<std::string, uint32_t>> CqWidths(const CactFile& file) {
  std::vector<std::pair<std::string, uint32_t>> cq;
  std::map<std::string, uint32_t> folded;
  bool layers_agree = true;
  for (const TensorEntry& t : file.tensors()) {
    if (!t.is_cq()) continue;
    cq.emplace_back(t.name, t.record.bits);
    auto [it, fresh] = folded.emplace(SchemeMatchName(t.name), t.record.bits);
    layers_agree = layers_agree && (fresh || it->second == t.record.bits);
  }
  if (file.generation() == 2 || layers_agree)
    for (auto& [name, bits] : cq) name = SchemeMatchName(name);
  return cq;
}

}  // namespace

std::string InferScheme(const CactFile& file) {
  const std::vector<std::pair<std::string, uint32_t>> cq = CqWidths(file);
  if (cq.empty()) return "";
  std::map<uint32_t, int> count;
  for (const auto& [match, bits] : cq) ++count[bits];
  Scheme s;
  s.default_bits = 0;
  int best = -1;
  for (auto [bits, n] : count)
    if (n > best) best = n, s.default_bits = bits;
  // Greedy: for each record the current rules get wrong, add the shortest prefix whose
  // members all share that record's width.
  for (const auto& [match, bits] : cq) {
    if (s.BitsForMatchName(match) == bits) continue;
    for (const std::string& p : Prefixes(match)) {
      bool uniform = true;
      for (const auto& [other, obits] : cq) {
        if (other.rfind(p, 0) == 0 && obits != bits) {
          uniform = false;
          break;
        }
      }
      if (uniform) {
        s.rules.emplace_back(p, bits);
        break;
      }
    }
    // The exact name as the last resort.
    if (s.BitsForMatchName(match) != bits) s.rules.emplace_back(match, bits);
  }
  return s.ToString();
}

}  // namespace cact
