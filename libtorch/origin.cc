#include "libtorch/origin.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "formats/cact/geometry_json.h"
#include "formats/tokenizer_blob.h"
#include "lib/sha256.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"
#include "quant/scheme_inference.h"

namespace cact::torchscript {
namespace {

using json = nlohmann::json;

}  // namespace

std::string BufferNameFor(const TensorEntry& t) {
  if (t.kind == TensorKind::kTokenizer) return "tokenizer";
  return absl::StrFormat("blob_%03u", t.index);
}

Origin OriginOf(const CactFile& file) {
  Origin o;
  o.source_path = file.path();
  o.source_sha256 = Sha256Hex(file.bytes().span());
  o.source_bytes = file.bytes().size();
  o.prefix_bytes = FirstBlobOffset(file.header().codebook_len, file.header().num_tensors);
  o.geometry = file.geometry();
  o.scheme = InferScheme(file);
  o.codebook_group = file.codebook_group();
  o.heads = file.probe_heads();
  if (auto tok = ParseTokenizerBlob(file.tokenizer_blob(), file.path()); tok.ok()) {
    o.pad_id = tok->pad_id;
  }
  for (const TensorEntry& t : file.tensors()) {
    o.tensors.push_back({t.index, t.name, t.record, BufferNameFor(t)});
  }
  return o;
}

std::string OriginToJson(const Origin& o) {
  json tensors = json::array();
  for (const OriginTensor& t : o.tensors) {
    const TensorRecord& r = t.record;
    json jt{{"index", t.index},
            {"name", t.name},
            {"dtype", DTypeName(r.dtype)},
            {"shape", std::vector<uint32_t>(r.shape.begin(), r.shape.begin() + r.ndim)},
            {"offset", r.offset},
            {"nbytes", r.nbytes},
            {"buffer", t.buffer}};
    if (r.dtype == DType::kCQ) {
      jt["bits"] = r.bits;
      jt["width"] = WidthName(r.bits);
      jt["group"] = r.group;
    }
    tensors.push_back(std::move(jt));
  }
  json heads = json::array();
  for (const ProbeHeadSpec& h : o.heads) {
    heads.push_back(
        {{"name", h.name()}, {"kind", int(h.kind)}, {"probes", h.probes}, {"out_dim", h.out_dim}});
  }
  json j{{"format", kFormatTag},
         {"version", kFormatVersion},
         {"source",
          {{"path", o.source_path},
           {"sha256", o.source_sha256},
           {"bytes", o.source_bytes},
           {"prefix_bytes", o.prefix_bytes}}},
         {"geometry", GeometryToJson(o.geometry)},
         {"scheme", o.scheme},
         {"codebook_group", o.codebook_group},
         {"pad_id", o.pad_id},
         {"probe_heads", heads},
         {"tensors", tensors}};
  return j.dump(1);
}

absl::StatusOr<Origin> OriginFromJson(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return FileError(where, "the cact_json attribute is not valid JSON");
  }
  if (j.value("format", "") != kFormatTag) {
    return FileError(where, "not made by cact-torch (cact_json has no \"format\": \"cact-torch\")");
  }
  if (j.value("version", 0) != kFormatVersion) {
    return FileError(where,
                     absl::StrFormat("cact-torch format version %d is not supported (expected %d)",
                                     j.value("version", 0), kFormatVersion));
  }
  try {
    Origin o;
    const json& src = j.at("source");
    o.source_path = src.at("path");
    o.source_sha256 = src.at("sha256");
    o.source_bytes = src.at("bytes");
    o.prefix_bytes = src.at("prefix_bytes");
    absl::StatusOr<Geometry> geometry = GeometryFromJson(j.at("geometry"));
    if (!geometry.ok()) return geometry.status();
    o.geometry = *geometry;
    o.scheme = j.at("scheme");
    o.codebook_group = j.at("codebook_group");
    o.pad_id = j.at("pad_id");
    for (const json& h : j.at("probe_heads")) {
      o.heads.push_back({ProbeHead(h.at("kind").get<int>()), h.at("probes"), h.at("out_dim")});
    }
    for (const json& jt : j.at("tensors")) {
      OriginTensor t;
      t.index = jt.at("index");
      t.name = jt.at("name");
      t.buffer = jt.at("buffer");
      t.record.offset = jt.at("offset");
      t.record.nbytes = jt.at("nbytes");
      std::vector<uint32_t> shape = jt.at("shape");
      if (shape.size() > 4)
        return FileError(where, "cact_json: tensor '" + t.name + "' has more than 4 dims");
      t.record.ndim = uint8_t(shape.size());
      std::copy(shape.begin(), shape.end(), t.record.shape.begin());
      o.tensors.push_back(std::move(t));
    }
    return o;
  } catch (const json::exception& e) {
    return FileError(where, std::string("cact_json is incomplete: ") + e.what());
  }
}

absl::StatusOr<std::vector<uint8_t>> ReassembleSource(
    const Origin& o, std::span<const uint8_t> prefix,
    const std::vector<std::span<const uint8_t>>& blobs, const std::string& where) {
  if (prefix.size() != o.prefix_bytes || o.prefix_bytes > o.source_bytes) {
    return FileError(where, absl::StrFormat("carried header bytes: %u bytes, expected %u",
                                            prefix.size(), o.prefix_bytes));
  }
  if (blobs.size() != o.tensors.size()) {
    return FileError(where, "carried blobs do not match the tensor list");
  }
  // Bound the allocation by the bytes actually carried (a lying JSON must not make us
  // allocate without limit): blobs plus at most 63 bytes of padding before each.
  uint64_t carried = prefix.size();
  for (const auto& b : blobs) carried += b.size() + kBlobAlign;
  if (o.source_bytes > carried) {
    return FileError(
        where, absl::StrFormat("cact_json claims a %u-byte source but only %u bytes are carried",
                               o.source_bytes, carried));
  }
  std::vector<uint8_t> bytes(o.source_bytes, 0);
  std::memcpy(bytes.data(), prefix.data(), prefix.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    const TensorRecord& r = o.tensors[i].record;
    if (blobs[i].size() != r.nbytes || r.offset < o.prefix_bytes || r.offset > o.source_bytes ||
        r.nbytes > o.source_bytes - r.offset) {
      return FileError(where,
                       absl::StrFormat("carried blob of '%s' (%u bytes) does not fit its record "
                                       "(offset %u, %u bytes)",
                                       o.tensors[i].name, blobs[i].size(), r.offset, r.nbytes));
    }
    if (!blobs[i].empty()) std::memcpy(bytes.data() + r.offset, blobs[i].data(), blobs[i].size());
  }
  std::string sha = Sha256Hex(bytes);
  if (sha != o.source_sha256) {
    return FileError(
        where, "the carried original bytes do not reassemble the source file (SHA-256 " + sha +
                   ", recorded " + o.source_sha256 + ")");
  }
  return bytes;
}

}  // namespace cact::torchscript
