// The generation-3 (Needle 3) .cact header: struct '<48If', 196 bytes, tag 0x05E12A84. The
// codebook and the 44-byte records that follow are those of generation 2 (header.h).
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "formats/needle/geometry3.h"

namespace cact {

inline constexpr uint32_t kCact3Tag = 0x05E12A84;
inline constexpr size_t kHeader3Bytes = 196;
inline constexpr size_t kHeader3Fields = 49;  // 48 u32 words and rope_theta

struct Header3 {
  uint32_t tag = kCact3Tag;
  uint32_t num_tensors = 0;
  uint32_t codebook_len = 28;
  Geometry3 geometry;
};

// Little-endian '<48If'. Parse only needs the 196 bytes; ValidateHeader3 checks every field
// (its errors name `header.<field>` and the field's byte offset).
Header3 ParseHeader3(const uint8_t* bytes196);
std::array<uint8_t, kHeader3Bytes> SerializeHeader3(const Header3& h);
absl::Status ValidateHeader3(const Header3& h, const std::string& file);

// Name of header field `index` (0 .. 48) as the exporter spells it ("engram_sites[3]"),
// and its byte offset.
std::string Header3FieldName(int index);
inline constexpr uint64_t Header3FieldOffset(int index) { return uint64_t(index) * 4; }

// Offset of the first blob: align64(196 + 4*codebook_len + 44*num_tensors).
uint64_t FirstBlobOffset3(uint32_t codebook_len, uint32_t num_tensors);

}  // namespace cact
