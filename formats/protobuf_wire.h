// A minimal protobuf wire-format reader: enough to walk a message's fields (varint,
// fixed32, fixed64, length-delimited) with every length bounds-checked.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace cact {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct WireField {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t varint = 0;             // kVarint, kFixed32, kFixed64 (raw bits)
  std::span<const uint8_t> bytes;  // kBytes
  uint64_t offset = 0;             // where the field's tag starts in the top-level buffer
  uint64_t payload_offset = 0;     // kBytes: where `bytes` start in the top-level buffer
};

class WireReader {
 public:
  // `base` is the offset of `bytes` inside the top-level buffer (for error messages).
  WireReader(std::span<const uint8_t> bytes, const std::string& name, uint64_t base = 0)
      : bytes_(bytes), name_(name), base_(base) {}
  bool done() const { return pos_ >= bytes_.size(); }
  absl::StatusOr<WireField> Next();
  uint64_t base() const { return base_; }

 private:
  absl::StatusOr<uint64_t> Varint(const char* what);
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t base_;
  size_t pos_ = 0;
};

}  // namespace cact
