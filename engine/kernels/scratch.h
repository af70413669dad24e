// A growable 64-byte-aligned scratch buffer (one per thread in the kernels).
#pragma once
#include <cstddef>
#include <cstdlib>

namespace cact::kernels::internal {

class AlignedScratch {
 public:
  ~AlignedScratch() { std::free(p_); }
  template <typename T>
  T* Get(size_t count) {
    size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    if (bytes > cap_) {
      std::free(p_);
      p_ = std::aligned_alloc(64, bytes);
      cap_ = bytes;
    }
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace cact::kernels::internal
