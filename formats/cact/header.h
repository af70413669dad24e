// The fixed parts of a .cact file: 120-byte header, codebook, 44-byte directory records.
// See docs/format.md and ../shared/docs/cact-spec.md section 1.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cq_types.h"
#include "formats/needle/geometry.h"

namespace cact {

inline constexpr uint32_t kCactTag = 0x05E12A83;
inline constexpr size_t kHeaderBytes = 120;  // struct '<29If'
inline constexpr size_t kRecordBytes = 44;   // struct '<BBHIIIIQQII'
inline constexpr size_t kBlobAlign = 64;

enum class DType : uint8_t { kFP16 = 1, kFP32 = 2, kCQ = 3, kRAW = 4 };
const char* DTypeName(DType d);  // "FP16", "FP32", "CQ", "RAW"

struct Header {
  uint32_t tag = kCactTag;
  uint32_t num_tensors = 0;
  uint32_t codebook_len = 28;
  Geometry geometry;
};

// Little-endian struct '<29If'. Parse checks only that 120 bytes are there; semantic
// validation lives in ValidateHeader (names the field and its byte offset).
Header ParseHeader(const uint8_t* bytes120);
std::array<uint8_t, kHeaderBytes> SerializeHeader(const Header& h);
absl::Status ValidateHeader(const Header& h, const std::string& file);
// Name of header field `index` (0..29) in error messages ("engram_sites[1]"), and its byte
// offset.
std::string HeaderFieldName(int index);
inline constexpr uint64_t HeaderFieldOffset(int index) { return uint64_t(index) * 4; }

struct TensorRecord {
  DType dtype = DType::kFP16;
  uint8_t ndim = 0;
  uint16_t pad = 0;
  std::array<uint32_t, 4> shape = {0, 0, 0, 0};
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  uint32_t group = 0;
  uint32_t bits = 0;  // 2, 3, 4 or 5 (= ternary) for CQ; 0 otherwise

  uint64_t NumElements() const;  // product of the first ndim dims (0 for RAW)
};

// A record's type: "CQ2 g128", "CQ1.58 g128", "FP16", "FP32", "RAW" ("?" for a bad dtype).
std::string TypeLabel(const TensorRecord& r);

TensorRecord ParseRecord(const uint8_t* bytes44);
std::array<uint8_t, kRecordBytes> SerializeRecord(const TensorRecord& r);

// Bytes a CQ blob must have for a logical [out, in] matrix: packed codes then FP16 norms.
// Returns 0 and sets *overflow on 64-bit overflow.
uint64_t CqBlobBytes(uint64_t out, uint64_t in, uint32_t group, uint32_t bits,
                     bool* overflow = nullptr);
// Number of bytes of packed codes per row (CqType::RowBytes; an unknown `bits` is taken as
// its own code width).
uint64_t CqRowCodeBytes(uint64_t in, uint32_t group, uint32_t bits);

inline uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
// Offset of the first blob: align64(120 + 4*codebook_len + 44*num_tensors).
uint64_t FirstBlobOffset(uint32_t codebook_len, uint32_t num_tensors);

}  // namespace cact
