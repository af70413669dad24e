#include "formats/tokenizer_blob.h"

#include <cstring>
#include <tuple>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/le_bytes.h"
#include "lib/status.h"

namespace cact {

namespace {
constexpr size_t kBlobHeaderBytes = 24;  // '<IIIIIBBH'
constexpr size_t kPieceHeaderBytes = 7;  // '<fBH'
constexpr uint8_t kMaxPieceType = 4;
}  // namespace

absl::StatusOr<TokenizerBlob> ParseTokenizerBlob(std::span<const uint8_t> bytes,
                                                 const std::string& file, uint64_t base_offset) {
  if (bytes.size() < kBlobHeaderBytes)
    return FormatError(
        file, "tokenizer header", base_offset,
        absl::StrFormat("blob has %d bytes, the header needs %d", bytes.size(), kBlobHeaderBytes));
  // A standalone blob file that is a whole .cact model (the blob is its last record).
  if (base_offset == 0 && LoadLE32(bytes.data()) == kCactTag)
    return FileError(file, "is a .cact model, not a tokenizer blob");
  const uint8_t* p = bytes.data();
  TokenizerBlob t;
  const uint32_t n = LoadLE32(p);
  t.pad_id = LoadLE32(p + 4);
  t.eos_id = LoadLE32(p + 8);
  t.bos_id = LoadLE32(p + 12);
  t.unk_id = LoadLE32(p + 16);
  t.add_dummy_prefix = p[20];
  t.byte_fallback = p[21];
  t.reserved = LoadLE16(p + 22);
  // Every piece needs at least 7 bytes: bounds the allocation by the blob size.
  if (uint64_t(n) * kPieceHeaderBytes > bytes.size() - kBlobHeaderBytes)
    return FormatError(
        file, "tokenizer n_pieces", base_offset,
        absl::StrFormat("%d pieces need at least %d bytes but the blob has %d after "
                        "its header",
                        n, uint64_t(n) * kPieceHeaderBytes, bytes.size() - kBlobHeaderBytes));
  for (auto [id, name, off] : {std::tuple{t.pad_id, "pad_id", 4},
                               {t.eos_id, "eos_id", 8},
                               {t.bos_id, "bos_id", 12},
                               {t.unk_id, "unk_id", 16}}) {
    if (id >= n)
      return FormatError(file, std::string("tokenizer ") + name, base_offset + off,
                         absl::StrFormat("%d is not a piece id (n_pieces %d)", id, n));
  }
  t.pieces.resize(n);
  size_t pos = kBlobHeaderBytes;
  for (uint32_t i = 0; i < n; ++i) {
    if (bytes.size() - pos < kPieceHeaderBytes)
      return FormatError(file, absl::StrFormat("tokenizer piece %d", i), base_offset + pos,
                         "blob ends inside the piece header");
    TokenizerPiece& piece = t.pieces[i];
    piece.score = LoadLEF32(p + pos);
    const uint8_t type = p[pos + 4];
    const uint16_t len = LoadLE16(p + pos + 5);
    if (type > kMaxPieceType)
      return FormatError(file, absl::StrFormat("tokenizer piece %d type", i), base_offset + pos + 4,
                         absl::StrFormat("%d is not a piece type (0 normal .. 4 byte)", type));
    piece.type = PieceType(type);
    pos += kPieceHeaderBytes;
    if (bytes.size() - pos < len)
      return FormatError(
          file, absl::StrFormat("tokenizer piece %d length", i), base_offset + pos - 2,
          absl::StrFormat("%d bytes but only %d remain in the blob", len, bytes.size() - pos));
    piece.surface.assign(reinterpret_cast<const char*>(p + pos), len);
    pos += len;
  }
  if (pos != bytes.size())
    return FormatError(file, "tokenizer end", base_offset + pos,
                       absl::StrFormat("%d bytes follow the last piece", bytes.size() - pos));
  return t;
}

std::vector<uint8_t> SerializeTokenizerBlob(const TokenizerBlob& t) {
  size_t total = kBlobHeaderBytes;
  for (const TokenizerPiece& piece : t.pieces) total += kPieceHeaderBytes + piece.surface.size();
  std::vector<uint8_t> out(total);
  uint8_t* p = out.data();
  StoreLE32(p, uint32_t(t.pieces.size()));
  StoreLE32(p + 4, t.pad_id);
  StoreLE32(p + 8, t.eos_id);
  StoreLE32(p + 12, t.bos_id);
  StoreLE32(p + 16, t.unk_id);
  p[20] = t.add_dummy_prefix;
  p[21] = t.byte_fallback;
  StoreLE16(p + 22, t.reserved);
  size_t pos = kBlobHeaderBytes;
  for (const TokenizerPiece& piece : t.pieces) {
    StoreLEF32(p + pos, piece.score);
    p[pos + 4] = uint8_t(piece.type);
    StoreLE16(p + pos + 5, uint16_t(piece.surface.size()));
    pos += kPieceHeaderBytes;
    std::memcpy(p + pos, piece.surface.data(), piece.surface.size());
    pos += piece.surface.size();
  }
  return out;
}

const std::vector<std::string>& ChatMarkers() {
  static const std::vector<std::string> markers = {
      "<|im_start|>", "<|im_end|>",  "<think>",      "</think>",      "<tools>",
      "</tools>",     "<tool_call>", "</tool_call>", "<tool_result>", "</tool_result>"};
  return markers;
}

}  // namespace cact
