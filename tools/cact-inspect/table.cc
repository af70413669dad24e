#include "tools/cact-inspect/table.h"

#include <algorithm>

namespace cact::inspect {

Table::Table(std::vector<std::string> columns) {
  for (auto& c : columns) {
    bool right = !c.empty() && c[0] == '>';
    right_.push_back(right);
    cols_.push_back(right ? c.substr(1) : c);
  }
}

void Table::Add(std::vector<std::string> row) {
  row.resize(cols_.size());
  rows_.push_back(std::move(row));
}

static size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return w;
}

void Table::Print(FILE* out, bool markdown, const std::string& indent) const {
  std::vector<size_t> w(cols_.size());
  for (size_t i = 0; i < cols_.size(); ++i) w[i] = DisplayWidth(cols_[i]);
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], DisplayWidth(r[i]));
  auto cell = [&](const std::string& s, size_t i) {
    std::string pad(w[i] - DisplayWidth(s), ' ');
    return right_[i] ? pad + s : s + pad;
  };
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = indent + (markdown ? "| " : "");
    for (size_t i = 0; i < r.size(); ++i) {
      s += cell(r[i], i);
      if (i + 1 < r.size()) s += markdown ? " | " : "  ";
    }
    if (markdown) s += " |";
    while (!markdown && !s.empty() && s.back() == ' ') s.pop_back();
    std::fprintf(out, "%s\n", s.c_str());
  };
  line(cols_);
  std::vector<std::string> rule(cols_.size());
  for (size_t i = 0; i < cols_.size(); ++i) {
    if (markdown)
      rule[i] = right_[i] ? std::string(w[i] - 1, '-') + ":" : std::string(w[i], '-');
    else
      rule[i] = std::string(w[i], '-');
  }
  line(rule);
  for (const auto& r : rows_) line(r);
}

std::string Thousands(uint64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out.push_back(',');
    out.push_back(*it);
    ++n;
  }
  return std::string(out.rbegin(), out.rend());
}

}  // namespace cact::inspect
