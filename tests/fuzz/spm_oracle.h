// libsentencepiece behind a plain interface: its header declares its own `absl`
// namespace shims, which clash with the real Abseil, so only spm_oracle.cc includes it.
#pragma once
#include <string>
#include <vector>

namespace cact::fuzz {

class SpmOracle {
 public:
  explicit SpmOracle(const std::string& model_path);  // aborts when the model does not load
  ~SpmOracle();
  std::vector<int> Encode(const std::string& text) const;
  std::string Decode(const std::vector<int>& ids) const;

 private:
  void* processor_;
};

}  // namespace cact::fuzz
