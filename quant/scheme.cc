// Scheme parsing is strict: a scheme decides the numerics of a shipped model, so every
// malformed entry is an error that names the entry and where it starts in the text.
#include "quant/scheme.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"

namespace cact {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool ParseWidth(const std::string& v, uint32_t* bits) {
  const CqType* t = FindCqTypeByWidth(v);
  if (t) *bits = t->bits;
  return t != nullptr;
}

bool ValidKey(const std::string& k) {
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}

}  // namespace

uint32_t Scheme::BitsFor(const std::string& canonical_name) const {
  return BitsForMatchName(SchemeMatchName(canonical_name));
}

uint32_t Scheme::BitsForMatchName(const std::string& name) const {
  size_t best_len = 0;
  uint32_t bits = default_bits;
  for (const auto& [prefix, b] : rules) {
    if (prefix.size() > best_len && name.compare(0, prefix.size(), prefix) == 0) {
      best_len = prefix.size();
      bits = b;
    }
  }
  return bits;
}

std::string Scheme::ToString() const {
  std::string s;
  for (const auto& [prefix, b] : rules) s += prefix + "=" + WidthName(b) + ",";
  return s + "default=" + WidthName(default_bits);
}

absl::Status CheckRulesMatch(const Scheme& scheme, const std::vector<std::string>& matrix_names) {
  std::vector<std::string> unused;
  for (const auto& [prefix, bits] : scheme.rules) {
    bool used = false;
    for (const std::string& n : matrix_names)
      used = used || SchemeMatchName(n).compare(0, prefix.size(), prefix) == 0;
    if (!used) unused.push_back("\"" + prefix + "\"");
  }
  if (unused.empty()) return absl::OkStatus();
  std::string list;
  for (const std::string& u : unused) list += (list.empty() ? "" : ", ") + u;
  return absl::InvalidArgumentError(absl::StrFormat(
      "scheme \"%s\": %s matches no CQ tensor of this model (canonical names look like embedding, "
      "attn.q_proj, mhc_phi_pre, engram0.tables)",
      scheme.ToString(), list));
}

absl::StatusOr<Scheme> ParseScheme(const std::string& text) {
  Scheme scheme;
  bool have_default = false;
  size_t start = 0, index = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string entry = text.substr(start, comma - start);
    const size_t at = start + 1;  // 1-based character position of the entry
    start = comma + 1;
    if (Trim(entry).empty()) continue;  // "a=2,,default=2" and a trailing comma are fine
    ++index;
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrFormat("scheme \"%s\": entry %d \"%s\" (at character %d): %s", text, index,
                          Trim(entry), at, what));
    };
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) return error("expected PREFIX=BITS");
    const std::string key = Trim(entry.substr(0, eq)), value = Trim(entry.substr(eq + 1));
    if (key.empty()) return error("no tensor prefix before '='");
    if (!ValidKey(key)) return error("prefix may use only letters, digits, '_' and '.'");
    uint32_t bits = 0;
    if (!ParseWidth(value, &bits))
      return error(absl::StrFormat("width \"%s\" is not one of 2, 3, 4, 1.58", value));
    if (key == "default") {
      if (have_default) return error("default is given twice");
      have_default = true;
      scheme.default_bits = bits;
      continue;
    }
    if (SchemeMatchName(key) != key)
      return error(
          absl::StrFormat("per-layer rules do not exist: layers are matched as \"%s\" (write that "
                          "to mean every layer)",
                          SchemeMatchName(key)));
    for (const auto& rule : scheme.rules)
      if (rule.first == key) return error("prefix \"" + key + "\" is given twice");
    scheme.rules.emplace_back(key, bits);
  }
  if (!have_default)
    return absl::InvalidArgumentError(absl::StrFormat(
        "scheme \"%s\": needs a default=BITS entry (no built-in fallback width)", text));
  return scheme;
}

}  // namespace cact
