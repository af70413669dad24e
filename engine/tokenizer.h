// SentencePiece BPE encoding and decoding from the .cact RAW tokenizer blob, producing
// exactly the ids of libsentencepiece (0.1.97) for models with identity normalization,
// extra whitespace kept, dummy prefix, byte fallback and user-defined chat markers.
//
// Encoding, as libsentencepiece does it:
//  1. Normalize: empty input stays empty; prepend U+2581 (dummy prefix); copy the text,
//     matching user-defined pieces first (longest), otherwise one UTF-8 character at a
//     time (an invalid byte becomes U+FFFD); every ' ' becomes U+2581.
//  2. Split into symbols: a user-defined piece is one frozen symbol, else one character.
//  3. Repeatedly merge the adjacent pair whose concatenation is a normal/user-defined piece
//     with the highest score (leftmost on ties), until no pair is in the vocabulary.
//  4. A symbol that is not a piece becomes byte pieces <0xAB> (byte fallback), else unk.
// Decoding: control pieces vanish, unknown renders " \u2047 ", runs of byte pieces are joined
// into UTF-8 (each invalid byte -> U+FFFD), U+2581 -> ' ', and the dummy-prefix space of the
// first non-control piece is removed.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "formats/tokenizer_blob.h"

namespace cact {

class Tokenizer {
 public:
  static absl::StatusOr<Tokenizer> FromBlob(TokenizerBlob blob);
  // Move-only: the lookup tables are views of the pieces' strings.
  Tokenizer(Tokenizer&&) = default;
  Tokenizer& operator=(Tokenizer&&) = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  // Parses the RAW record of a .cact file.
  static absl::StatusOr<Tokenizer> FromBytes(std::span<const uint8_t> raw,
                                             const std::string& file = "tokenizer");

  std::vector<int32_t> Encode(std::string_view text) const;
  // The pieces Encode would produce (for diagnostics and tests).
  std::vector<std::string> EncodeAsPieces(std::string_view text) const;
  std::string Decode(std::span<const int32_t> ids) const;

  int32_t vocab_size() const { return int32_t(blob_.pieces.size()); }
  int32_t bos_id() const { return int32_t(blob_.bos_id); }
  int32_t eos_id() const { return int32_t(blob_.eos_id); }
  int32_t pad_id() const { return int32_t(blob_.pad_id); }
  int32_t unk_id() const { return int32_t(blob_.unk_id); }
  // Id of a piece by its surface (reserved pieces first, as libsentencepiece), or -1.
  int32_t PieceToId(std::string_view piece) const;
  const std::string& IdToPiece(int32_t id) const;
  bool IsControl(int32_t id) const;
  const TokenizerBlob& blob() const { return blob_; }

 private:
  Tokenizer() = default;
  struct Symbol {
    int prev = -1, next = -1;
    size_t begin = 0, size = 0;  // byte range in the normalized string
    bool frozen = false;         // user-defined piece: never merged
  };
  std::string Normalize(std::string_view text) const;
  // Longest user-defined piece at the start of `s` (0 if none).
  size_t MatchUserDefined(std::string_view s) const;
  // BPE over the normalized string: the final symbols' byte ranges.
  std::vector<std::string_view> Segment(std::string_view normalized) const;
  void EmitPiece(std::string_view piece, std::vector<int32_t>* ids) const;

  // The tables below view blob_'s piece strings (no second copy of 8,192 strings), in flat
  // hash maps (no node per piece): ~0.5 MB less of a session's RSS than node maps of
  // strings. Moving the tokenizer moves the pieces' buffer, not the strings.
  TokenizerBlob blob_;
  absl::flat_hash_map<std::string_view, int32_t> mergeable_;  // normal + user-defined pieces
  absl::flat_hash_map<std::string_view, int32_t> reserved_;   // control, unknown, byte pieces
  std::vector<std::string_view> user_defined_;               // sorted longest first
  std::array<int32_t, 256> byte_ids_;                   // -1 when the byte piece is missing
};

}  // namespace cact
