#include "libtorch/tensor_bounds.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "lib/status.h"

namespace cact::torchscript {
namespace {

// Forwards to the CPU allocator it replaces; records sizes while any scope is open.
class RecordingAllocator final : public c10::Allocator {
 public:
  static RecordingAllocator& Get() {
    static RecordingAllocator* const a = [] {
      auto* r = new RecordingAllocator(c10::GetCPUAllocator());
      c10::SetCPUAllocator(r, /*priority=*/UINT8_MAX);
      return r;
    }();
    return *a;
  }
  c10::DataPtr allocate(size_t n) const override {
    c10::DataPtr p = base_->allocate(n);
    std::lock_guard<std::mutex> lock(mu_);
    if (scopes_ > 0) sizes_[p.get()] = n;
    return p;
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

  std::optional<size_t> SizeAt(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    return it == sizes_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    if (scopes_++ == 0) sizes_.clear();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--scopes_ == 0) sizes_.clear();
  }

 private:
  explicit RecordingAllocator(c10::Allocator* base) : base_(base) {}
  c10::Allocator* const base_;
  mutable std::mutex mu_;
  int scopes_ = 0;
  mutable std::unordered_map<const void*, size_t> sizes_;
};

}  // namespace

RecordSizeScope::RecordSizeScope() { RecordingAllocator::Get().Open(); }
RecordSizeScope::~RecordSizeScope() { RecordingAllocator::Get().Close(); }

absl::Status CheckTensorInRecord(const at::Tensor& t, const std::string& name,
                                 const std::string& path) {
  auto bad = [&](const std::string& what) {
    return FileError(path, "tensor " + name + " " + what);
  };
  if (t.layout() != at::kStrided || !t.has_storage()) return bad("is not a dense tensor");
  const int64_t numel = t.numel();
  if (numel == 0) return absl::OkStatus();
  const uint64_t item = uint64_t(t.element_size());
  const std::optional<size_t> record = RecordingAllocator::Get().SizeAt(t.storage().data());
  if (!record) return bad("has data that was not read from the archive");
  const uint64_t bytes = std::min<uint64_t>(t.storage().nbytes(), *record);
  if (item == 0 || t.storage_offset() < 0 || uint64_t(numel) > bytes / item) {
    return bad("has more elements than its data record holds");
  }
  uint64_t last = uint64_t(t.storage_offset());  // element index of the furthest element
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (last >= bytes) return bad("reaches past the end of its data record");
    const int64_t size = t.size(d), stride = t.stride(d);
    if (size > int64_t(UINT32_MAX)) return bad("has a dimension over 2^32");
    if (size <= 1 || stride == 0) continue;
    if (stride < 0) return bad("has a negative stride");
    if (uint64_t(size - 1) >
        (bytes - last) / uint64_t(stride)) {  // also keeps the sum from overflowing
      return bad("reaches past the end of its data record");
    }
    last += uint64_t(size - 1) * uint64_t(stride);
  }
  if (last >= bytes / item) return bad("reaches past the end of its data record");
  return absl::OkStatus();
}

}  // namespace cact::torchscript
