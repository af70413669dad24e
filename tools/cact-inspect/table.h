// A small table printer: aligned text for people, or Markdown.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace cact::inspect {

class Table {
 public:
  // Columns whose name starts with '>' are right-aligned (the '>' is not printed).
  explicit Table(std::vector<std::string> columns);
  void Add(std::vector<std::string> row);
  void Print(FILE* out, bool markdown, const std::string& indent = "") const;

 private:
  std::vector<std::string> cols_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// 13737807 -> "13,737,807"
std::string Thousands(uint64_t v);

}  // namespace cact::inspect
