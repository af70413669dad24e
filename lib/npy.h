// NumPy .npy v1/v2 reading (little-endian f4/f8/f2/i4/i8/u1, C order) and writing (f4).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

struct NpyArray {
  std::vector<size_t> shape;
  std::vector<float> data;  // converted to float32 whatever the stored dtype
  std::string dtype;        // the stored descr, e.g. "<f4"
  size_t size() const { return data.size(); }
};

absl::StatusOr<NpyArray> ReadNpy(const std::string& path);
absl::StatusOr<NpyArray> ParseNpy(const std::string& name, const uint8_t* bytes, size_t n);
// Serialises a float32 array; WriteNpy writes atomically (temp file + rename).
std::vector<uint8_t> SerializeNpyF32(const float* data, const std::vector<size_t>& shape);
absl::Status WriteNpy(const std::string& path, const float* data, const std::vector<size_t>& shape);

}  // namespace cact
