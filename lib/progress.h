// Progress for long work: a line per step on a terminal (overwritten) or a plain log
// line per step when stderr is not a terminal. Silent when disabled.
#pragma once
#include <cstdio>
#include <string>

namespace cact {

class Progress {
 public:
  Progress(std::string label, size_t total, bool enabled = true);
  // Prints "[ i/total] message"; i counts from 1.
  void Step(size_t i, const std::string& message);
  void Done(const std::string& message = "");

 private:
  std::string label_;
  size_t total_;
  bool enabled_, tty_;
};

}  // namespace cact
