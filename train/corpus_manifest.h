// The corpus manifest: the exact list of documents a model was trained and scored on, to be
// committed and checked on another machine. A TSV file:
//   # cact corpus manifest v1
//   split<TAB>bytes<TAB>sha256<TAB>path        (one line a document, in corpus order)
// split is "train" or "heldout", bytes a decimal size, sha256 64 lowercase hex digits of the
// file on disk. The manifest's split is authoritative when loading (it was computed from
// the hash when the manifest was written). No two lines share a hash or a path.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/corpus.h"

namespace cact::train {

inline constexpr std::string_view kManifestHeader = "# cact corpus manifest v1";

struct ManifestEntry {
  Split split = Split::kTrain;
  uint64_t bytes = 0;
  std::string sha256;
  std::string path;
  bool operator==(const ManifestEntry&) const = default;
};

std::vector<ManifestEntry> ManifestOf(std::span<const Document> docs);
// Fails when a path contains a tab, a newline or a carriage return (it could not be read back).
absl::StatusOr<std::string> FormatManifest(std::span<const ManifestEntry> entries);
absl::Status WriteManifest(const std::string& path, std::span<const ManifestEntry> entries);

// Errors read "NAME:LINE: FIELD: WHAT".
absl::StatusOr<std::vector<ManifestEntry>> ParseManifest(std::string_view text,
                                                         std::string_view name);
absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path);

// Reads every listed file, checks its size and SHA-256 against the manifest and normalises
// it. Any difference (missing or unreadable file, size, hash) fails, naming the manifest
// line, the path and what differs: reproduction never silently trains on other data.
absl::StatusOr<std::vector<Document>> LoadCorpusFromManifest(const std::string& manifest_path,
                                                             Spacing spacing = Spacing::kKeep);

}  // namespace cact::train
