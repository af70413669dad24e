// What an exported module carries so that `cact-torch import` can give back the source
// file byte for byte: the bytes before the first blob (header, codebook, directory), every
// record's original blob, and a JSON description (geometry, scheme, source SHA-256, per
// tensor dtype/width/group and where its parameter and blob live in the module).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"

namespace cact::torchscript {

inline constexpr const char* kFormatTag = "cact-torch";
inline constexpr int kFormatVersion = 1;
// Name of the string attribute holding the JSON, and of the submodule holding the bytes.
inline constexpr const char* kJsonAttribute = "cact_json";
inline constexpr const char* kSourceModule = "cact_source";
inline constexpr const char* kPrefixBuffer = "prefix";

struct OriginTensor {
  uint32_t index = 0;
  std::string name;  // canonical; also the parameter path in the module ("layer00.q_proj")
  TensorRecord record;
  std::string buffer;  // buffer name in cact_source: "blob_003", "tokenizer"
};

struct Origin {
  std::string source_path;
  std::string source_sha256;
  uint64_t source_bytes = 0;
  uint64_t prefix_bytes = 0;  // header + codebook + directory + padding
  Geometry geometry;
  std::string scheme;  // inferred from the records (quant/scheme_inference.h)
  uint32_t codebook_group = 0;
  uint32_t pad_id = 0;
  std::vector<ProbeHeadSpec> heads;
  std::vector<OriginTensor> tensors;  // directory order, tokenizer last
};

Origin OriginOf(const CactFile& file);
std::string BufferNameFor(const TensorEntry& t);  // "blob_%03u" or "tokenizer"

std::string OriginToJson(const Origin& o);
// `where` names the input in errors. Rejects other formats/versions.
absl::StatusOr<Origin> OriginFromJson(const std::string& json, const std::string& where);

// Rebuilds the source bytes: prefix, then each blob at its record's offset (zero gaps).
// Checks sizes against the records and the SHA-256 against the recorded one.
absl::StatusOr<std::vector<uint8_t>> ReassembleSource(
    const Origin& o, std::span<const uint8_t> prefix,
    const std::vector<std::span<const uint8_t>>& blobs, const std::string& where);

}  // namespace cact::torchscript
