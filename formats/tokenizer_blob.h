// The RAW tokenizer blob: header '<IIIIIBBH' then per piece '<fBH' + UTF-8 surface.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

enum class PieceType : uint8_t {
  kNormal = 0,
  kUnknown = 1,
  kControl = 2,
  kUserDefined = 3,
  kByte = 4
};

struct TokenizerPiece {
  std::string surface;  // UTF-8; byte pieces are spelled "<0xAB>"
  float score = 0;
  PieceType type = PieceType::kNormal;
};

struct TokenizerBlob {
  uint32_t pad_id = 0, eos_id = 1, bos_id = 2, unk_id = 3;
  uint8_t add_dummy_prefix = 1, byte_fallback = 1;
  uint16_t reserved = 0;
  std::vector<TokenizerPiece> pieces;
};

// `file` and `base_offset` (the blob's offset in its file) make error messages precise.
absl::StatusOr<TokenizerBlob> ParseTokenizerBlob(std::span<const uint8_t> bytes,
                                                 const std::string& file = "tokenizer",
                                                 uint64_t base_offset = 0);
std::vector<uint8_t> SerializeTokenizerBlob(const TokenizerBlob& t);

// The ten chat markers, ids 4..13.
const std::vector<std::string>& ChatMarkers();

}  // namespace cact
