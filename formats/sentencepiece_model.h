// Reads a SentencePiece ModelProto (.model) with a small protobuf wire-format reader (no
// libprotobuf) and converts it to the .cact tokenizer blob.
#pragma once
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "formats/tokenizer_blob.h"

namespace cact {

absl::StatusOr<TokenizerBlob> ReadSentencePieceModel(const std::string& path);
absl::StatusOr<TokenizerBlob> ParseSentencePieceModel(std::span<const uint8_t> bytes,
                                                      const std::string& name);

}  // namespace cact
