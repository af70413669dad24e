#include "lib/progress.h"

#include <unistd.h>

#include "absl/strings/str_format.h"

namespace cact {

Progress::Progress(std::string label, size_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(2)) {}

void Progress::Step(size_t i, const std::string& message) {
  if (!enabled_) return;
  int width = int(std::to_string(total_).size());
  std::string line = absl::StrFormat("[%*d/%d] %s", width, i, total_, message);
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::Done(const std::string& message) {
  if (!enabled_ || message.empty()) return;
  std::fprintf(stderr, "%s: %s\n", label_.c_str(), message.c_str());
}

}  // namespace cact
