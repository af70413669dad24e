#include "formats/sentencepiece_model.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/le_bytes.h"
#include "formats/protobuf_wire.h"
#include "lib/file_bytes.h"
#include "lib/status.h"

namespace cact {

namespace {

// sentencepiece_model.proto field numbers.
constexpr uint32_t kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr uint32_t kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kTrainerByteFallback = 35, kTrainerUnkId = 40, kTrainerBosId = 41,
                   kTrainerEosId = 42, kTrainerPadId = 43;
constexpr uint32_t kNormalizerAddDummyPrefix = 3;

// SentencePiece.Type -> blob piece type.
absl::StatusOr<PieceType> MapType(uint64_t sp_type, const std::string& name, uint64_t offset) {
  switch (sp_type) {
    case 1:
      return PieceType::kNormal;
    case 2:
      return PieceType::kUnknown;
    case 3:
      return PieceType::kControl;
    case 4:
      return PieceType::kUserDefined;
    case 5:
      return PieceType::kNormal;  // UNUSED: kept as a normal piece the model never emits
    case 6:
      return PieceType::kByte;
  }
  return FormatError(name, "piece type", offset,
                     absl::StrFormat("%d is not a SentencePiece type", sp_type));
}

absl::Status ParsePiece(const WireField& field, const std::string& name, TokenizerPiece* piece) {
  WireReader r(field.bytes, name, field.payload_offset);
  piece->type = PieceType::kNormal;  // proto default NORMAL
  while (!r.done()) {
    CACT_ASSIGN_OR_RETURN(WireField f, r.Next());
    if (f.number == kPiecePiece && f.type == WireType::kBytes) {
      if (f.bytes.size() > UINT16_MAX)
        return FormatError(name, "piece", f.offset, "piece longer than 65535 bytes");
      piece->surface.assign(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size());
    } else if (f.number == kPieceScore && f.type == WireType::kFixed32) {
      const uint32_t bits = uint32_t(f.varint);
      std::memcpy(&piece->score, &bits, 4);
    } else if (f.number == kPieceType && f.type == WireType::kVarint) {
      CACT_ASSIGN_OR_RETURN(piece->type, MapType(f.varint, name, f.offset));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenizerBlob> ParseModel(std::span<const uint8_t> bytes, const std::string& name) {
  TokenizerBlob t;
  // Proto defaults (TrainerSpec: unk 0, bos 1, eos 2, pad -1; add_dummy_prefix true).
  int64_t unk = 0, bos = 1, eos = 2, pad = -1;
  bool byte_fallback = false, add_dummy_prefix = true;
  WireReader top(bytes, name);
  while (!top.done()) {
    CACT_ASSIGN_OR_RETURN(WireField f, top.Next());
    if (f.type != WireType::kBytes) continue;
    if (f.number == kModelPieces) {
      TokenizerPiece piece;
      CACT_RETURN_IF_ERROR(ParsePiece(f, name, &piece));
      t.pieces.push_back(std::move(piece));
    } else if (f.number == kModelTrainerSpec) {
      WireReader r(f.bytes, name, f.payload_offset);
      while (!r.done()) {
        CACT_ASSIGN_OR_RETURN(WireField s, r.Next());
        if (s.type != WireType::kVarint) continue;
        const int64_t v = int64_t(int32_t(uint32_t(s.varint)));  // int32 fields
        if (s.number == kTrainerUnkId)
          unk = v;
        else if (s.number == kTrainerBosId)
          bos = v;
        else if (s.number == kTrainerEosId)
          eos = v;
        else if (s.number == kTrainerPadId)
          pad = v;
        else if (s.number == kTrainerByteFallback)
          byte_fallback = s.varint != 0;
      }
    } else if (f.number == kModelNormalizerSpec) {
      WireReader r(f.bytes, name, f.payload_offset);
      while (!r.done()) {
        CACT_ASSIGN_OR_RETURN(WireField s, r.Next());
        if (s.type == WireType::kVarint && s.number == kNormalizerAddDummyPrefix)
          add_dummy_prefix = s.varint != 0;
      }
    }
  }
  if (t.pieces.empty()) return FileError(name, "SentencePiece model has no pieces");
  const int64_t n = int64_t(t.pieces.size());
  for (auto [id, field] :
       {std::pair{unk, "unk_id"}, {bos, "bos_id"}, {eos, "eos_id"}, {pad, "pad_id"}})
    if (id < 0 || id >= n)
      return FileError(name, absl::StrFormat("trainer_spec.%s %d is not a piece id of the %d "
                                             "pieces (the .cact blob needs all four)",
                                             field, id, n));
  t.unk_id = uint32_t(unk);
  t.bos_id = uint32_t(bos);
  t.eos_id = uint32_t(eos);
  t.pad_id = uint32_t(pad);
  t.add_dummy_prefix = add_dummy_prefix ? 1 : 0;
  t.byte_fallback = byte_fallback ? 1 : 0;
  return t;
}

}  // namespace

absl::StatusOr<TokenizerBlob> ParseSentencePieceModel(std::span<const uint8_t> bytes,
                                                      const std::string& name) {
  // A .cact model is the usual wrong file (it holds a tokenizer, in another form).
  if (bytes.size() >= 4 && LoadLE32(bytes.data()) == kCactTag)
    return FileError(name, "is a .cact model, not a SentencePiece .model");
  absl::StatusOr<TokenizerBlob> t = ParseModel(bytes, name);
  // A wire error on a file of another kind reads like damage: say what was expected.
  if (!t.ok() && t.status().message().find(": protobuf ") != std::string_view::npos)
    return absl::Status(t.status().code(),
                        std::string(t.status().message()) +
                            " (not a SentencePiece .model, or a damaged one)");
  return t;
}

absl::StatusOr<TokenizerBlob> ReadSentencePieceModel(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path, uint64_t{1} << 30));
  return ParseSentencePieceModel(bytes.span(), path);
}

}  // namespace cact
