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
// first non-control piece is removed. TokenDecoder does it one id at a time.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
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
  // Encode(text), and in `prefix_ids` how many of the ids write exactly the first
  // `prefix_size` bytes of `text` (nullopt when no token ends there).
  std::vector<int32_t> Encode(std::string_view text, size_t prefix_size,
                              std::optional<size_t>* prefix_ids) const;
  // The pieces Encode would produce (for diagnostics and tests).
  std::vector<std::string> EncodeAsPieces(std::string_view text) const;
  std::string Decode(std::span<const int32_t> ids) const;
  // The bytes token `id` writes after the first piece: U+2581 as a space, a byte piece as its
  // one byte (maybe part of a character). Empty for pieces that write none of their own:
  // control and unknown pieces (Decode shows the latter as " \u2047 "), ids out of range.
  std::string TokenBytes(int32_t id) const;

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
  // `mark`: a byte offset in `text`; *normalized_mark is where it lands in the result (npos
  // when inside a character).
  std::string Normalize(std::string_view text, size_t mark = std::string_view::npos,
                        size_t* normalized_mark = nullptr) const;
  // Longest user-defined piece at the start of `s` (0 if none).
  size_t MatchUserDefined(std::string_view s) const;
  // BPE over the normalized string: the final symbols' byte ranges.
  std::vector<std::string_view> Segment(std::string_view normalized) const;
  void EmitPiece(std::string_view piece, std::vector<int32_t>* ids) const;

  // Piece ids hashed by their surface (looked up by any string_view): 4 bytes a slot, where
  // maps from string keys copied every piece (~0.7 MB of a session's RSS). The functors
  // point at blob_'s piece array, which stays put when the tokenizer moves.
  struct SurfaceHash {
    using is_transparent = void;
    const TokenizerPiece* pieces = nullptr;
    size_t operator()(std::string_view s) const { return absl::Hash<std::string_view>()(s); }
    size_t operator()(int32_t id) const { return (*this)(std::string_view(pieces[id].surface)); }
  };
  struct SurfaceEq {
    using is_transparent = void;
    const TokenizerPiece* pieces = nullptr;
    std::string_view View(std::string_view s) const { return s; }
    std::string_view View(int32_t id) const { return pieces[id].surface; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) == View(b);
    }
  };
  using PieceSet = absl::flat_hash_set<int32_t, SurfaceHash, SurfaceEq>;

  TokenizerBlob blob_;
  PieceSet mergeable_;                          // normal + user-defined pieces
  PieceSet reserved_;                           // control, unknown, byte pieces
  std::vector<std::string_view> user_defined_;  // sorted longest first
  std::array<int32_t, 256> byte_ids_;           // -1 when the byte piece is missing
};

// Decodes one id at a time into exactly what Tokenizer::Decode gives for the whole list: a
// run of byte pieces is held until the next other piece (or Flush) joins it into UTF-8, so
// after any other piece the text is whole characters.
class TokenDecoder {
 public:
  explicit TokenDecoder(const Tokenizer& tokenizer) : tok_(&tokenizer) {}
  // Appends what `id` adds to the text (nothing while it only extends a run of bytes).
  void Add(int32_t id, std::string* text);
  // Appends the held bytes: whole characters as they are, each invalid byte as U+FFFD.
  void Flush(std::string* text);
  // True while a run of byte pieces is held back from the text.
  bool holding() const { return !bytes_.empty(); }

 private:
  const Tokenizer* tok_;
  std::string bytes_;     // the byte pieces not yet written
  bool at_start_ = true;  // until the first non-control piece: strip the dummy prefix
};

}  // namespace cact
