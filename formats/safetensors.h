// safetensors read/write: F32, F16, BF16 (read converts to float32), header size bound,
// offsets checked, no overlaps. The interchange format for float weights.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

inline constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;  // 100 MB

struct FloatTensor {
  std::string name;
  std::vector<uint32_t> shape;
  std::vector<float> data;
  std::string stored_dtype = "F32";  // as found on disk ("F32", "F16", "BF16")
};

struct Safetensors {
  std::vector<FloatTensor> tensors;             // in file order (offset order on read)
  std::map<std::string, std::string> metadata;  // __metadata__
  const FloatTensor* Find(const std::string& name) const;
};

absl::StatusOr<Safetensors> ReadSafetensors(const std::string& path);
absl::StatusOr<Safetensors> ParseSafetensors(std::span<const uint8_t> bytes,
                                             const std::string& name);
// Writes every tensor as `dtype` ("F32" default, or "F16"/"BF16"), atomically.
std::vector<uint8_t> SerializeSafetensors(const Safetensors& s, const std::string& dtype = "F32");
absl::Status WriteSafetensors(const std::string& path, const Safetensors& s,
                              const std::string& dtype = "F32");

}  // namespace cact
