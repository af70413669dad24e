#include "train/corpus_manifest.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/atomic_file.h"
#include "lib/sha256.h"
#include "lib/status.h"

namespace cact::train {
namespace {

absl::Status LineError(std::string_view name, size_t line, std::string_view field,
                       std::string_view what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s: %s", name, line, field, what));
}

// absl::StrSplit takes absl::string_view, which is not std::string_view in Debian's Abseil.
std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = s.find(sep);; at = s.find(sep)) {
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

// Canonical decimal only (no sign, no leading zeros), so a manifest round-trips byte for byte.
bool ParseBytes(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool IsSha256Hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Checks one listed file against its entry and returns its content.
absl::StatusOr<std::string> ReadListed(const ManifestEntry& e, std::string_view manifest,
                                       size_t line) {
  std::string raw;
  const FileRead r = ReadFileUpTo(e.path, e.bytes, &raw);
  const auto fail = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s:%d: %s: %s", manifest, line, e.path, what));
  };
  if (!r.error.empty()) return fail("cannot read the listed file (" + r.error + ")");
  if (r.size != e.bytes)
    return fail(absl::StrFormat("size %d bytes, the manifest says %d", r.size, e.bytes));
  const std::string sha = Sha256Hex({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()});
  if (sha != e.sha256)
    return fail(absl::StrFormat("sha256 %s, the manifest says %s", sha, e.sha256));
  return raw;
}

}  // namespace

std::vector<ManifestEntry> ManifestOf(std::span<const Document> docs) {
  std::vector<ManifestEntry> out;
  out.reserve(docs.size());
  for (const Document& d : docs) out.push_back({d.split, d.bytes, d.sha256, d.path});
  return out;
}

absl::StatusOr<std::string> FormatManifest(std::span<const ManifestEntry> entries) {
  std::string out = std::string(kManifestHeader) + "\n";
  for (const ManifestEntry& e : entries) {
    if (e.path.empty() ||
        e.path.find_first_of(std::string_view("\t\n\r\0", 4)) != std::string::npos)
      return absl::InvalidArgumentError("manifest: path cannot be written in a TSV line: \"" +
                                        e.path + "\"");
    absl::StrAppend(&out, std::string(SplitName(e.split)), "\t", e.bytes, "\t", e.sha256, "\t",
                    e.path, "\n");
  }
  return out;
}

absl::Status WriteManifest(const std::string& path, std::span<const ManifestEntry> entries) {
  CACT_ASSIGN_OR_RETURN(const std::string text, FormatManifest(entries));
  return WriteFileAtomic(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

absl::StatusOr<std::vector<ManifestEntry>> ParseManifest(std::string_view text,
                                                         std::string_view name) {
  std::vector<std::string_view> lines = SplitOn(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  if (lines.empty() || lines[0] != kManifestHeader)
    return LineError(name, 1, "header", "expected \"" + std::string(kManifestHeader) + "\"");
  std::vector<ManifestEntry> entries;
  absl::flat_hash_map<std::string, size_t> line_of_sha, line_of_path;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t line = i + 1;
    const std::vector<std::string_view> f = SplitOn(lines[i], '\t');
    if (f.size() != 4)
      return LineError(name, line, "line",
                       absl::StrFormat("expected 4 tab-separated fields (split, bytes, sha256, "
                                       "path), found %d",
                                       f.size()));
    ManifestEntry e;
    if (f[0] == "train") {
      e.split = Split::kTrain;
    } else if (f[0] == "heldout") {
      e.split = Split::kHeldOut;
    } else {
      return LineError(name, line, "split", "expected \"train\" or \"heldout\"");
    }
    if (!ParseBytes(f[1], &e.bytes))
      return LineError(name, line, "bytes", "expected a decimal size without sign or leading 0");
    if (!IsSha256Hex(f[2]))
      return LineError(name, line, "sha256", "expected 64 lowercase hex digits");
    if (f[3].empty() || f[3].find_first_of(std::string_view("\r\0", 2)) != std::string_view::npos)
      return LineError(name, line, "path", "empty or contains a carriage return or NUL");
    e.sha256 = std::string(f[2]);
    e.path = std::string(f[3]);
    if (auto [it, fresh] = line_of_sha.emplace(e.sha256, line); !fresh)
      return LineError(name, line, "sha256",
                       absl::StrFormat("same content as line %d", it->second));
    if (auto [it, fresh] = line_of_path.emplace(e.path, line); !fresh)
      return LineError(name, line, "path", absl::StrFormat("same path as line %d", it->second));
    entries.push_back(std::move(e));
  }
  return entries;
}

absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path) {
  std::string text;
  const FileRead r = ReadFileUpTo(path, uint64_t{1} << 30, &text);
  if (!r.ok()) return FileError(path, r.too_large ? "manifest larger than 1 GiB" : r.error);
  return ParseManifest(text, path);
}

absl::StatusOr<std::vector<Document>> LoadCorpusFromManifest(const std::string& manifest_path,
                                                             Spacing spacing) {
  CACT_ASSIGN_OR_RETURN(const std::vector<ManifestEntry> entries, ReadManifest(manifest_path));
  std::vector<Document> docs;
  docs.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const ManifestEntry& e = entries[i];
    CACT_ASSIGN_OR_RETURN(const std::string raw, ReadListed(e, manifest_path, i + 2));
    docs.push_back({e.path, e.bytes, e.sha256, e.split, NormalizeText(raw, spacing)});
  }
  return docs;
}

}  // namespace cact::train
