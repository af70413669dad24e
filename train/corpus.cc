#include "train/corpus.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "lib/atomic_file.h"
#include "lib/sha256.h"
#include "lib/status.h"

namespace cact::train {
namespace fs = std::filesystem;
namespace {

std::string_view WithoutTrailingSlashes(std::string_view p) {
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return p;
}

bool IsCandidateName(const fs::path& path, const CorpusFilter& filter) {
  const std::string name = path.filename().string();
  for (const std::string& pattern : filter.name_patterns)
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  const std::string parent = path.parent_path().string();
  for (const std::string& dir : filter.whole_dirs)
    if (WithoutTrailingSlashes(dir) == WithoutTrailingSlashes(parent)) return true;
  return false;
}

bool IsExcluded(const std::string& path, const CorpusFilter& filter) {
  for (const std::string& pattern : filter.exclude_patterns)
    if (fnmatch(pattern.c_str(), path.c_str(), 0) == 0) return true;
  return false;
}

// Compressed files are skipped by name: zlib and friends are not linked.
bool IsCompressedName(std::string_view path) {
  for (std::string_view ext : {".gz", ".bz2", ".xz", ".zst", ".lzma", ".Z"})
    if (path.ends_with(ext)) return true;
  return false;
}

// Appends the candidate files under `root` (or `root` itself when it is a file).
absl::Status AddCandidates(const std::string& root, const CorpusFilter& filter,
                           std::vector<std::string>* out, DiscoveryStats* stats) {
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) return FileError(root, "corpus root does not exist");
  if (fs::is_regular_file(st)) {
    out->push_back(root);
    return absl::OkStatus();
  }
  if (!fs::is_directory(st)) return FileError(root, "corpus root is not a file or directory");
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& e = *it;
    std::error_code entry_ec;
    if (e.is_symlink(entry_ec)) {
      ++stats->symlinks;
      continue;
    }
    if (!e.is_regular_file(entry_ec) || !IsCandidateName(e.path(), filter)) continue;
    if (IsExcluded(e.path().string(), filter)) {
      ++stats->excluded;
      continue;
    }
    out->push_back(e.path().string());
  }
  if (ec) return FileError(root, "walking the corpus root: " + ec.message());
  return absl::OkStatus();
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

// `line` without leading spaces and tabs or trailing spaces, tabs and '\r's, each inner run of
// spaces and tabs one space. ('\r's go with the trailing spaces: "a\r " must not become
// "a\r", which normalises again to "a".)
void AppendCollapsed(std::string_view line, std::string* out) {
  const size_t end = line.find_last_not_of(" \t\r");
  line = line.substr(0, end == std::string_view::npos ? 0 : end + 1);
  bool gap = false, any = false;
  for (char c : line) {
    if (c == ' ' || c == '\t') {
      gap = any;
      continue;
    }
    if (gap) out->push_back(' ');
    out->push_back(c);
    gap = false;
    any = true;
  }
}

}  // namespace

FileRead ReadFileUpTo(const std::string& path, uint64_t max_bytes, std::string* out) {
  FileRead r;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.error = std::strerror(errno);
    return r;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    r.error = "not a regular file";
  } else if (r.size = uint64_t(st.st_size); r.size > max_bytes) {
    r.too_large = true;
  } else {
    out->resize(size_t(r.size));
    size_t done = 0;
    while (done < out->size()) {
      const ssize_t n = read(fd, out->data() + done, out->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += size_t(n);
    }
    if (done != out->size()) r.error = "changed while being read";
  }
  close(fd);
  return r;
}

std::string_view SplitName(Split s) { return s == Split::kHeldOut ? "heldout" : "train"; }

uint64_t ContentKey(std::string_view sha256_hex) {
  uint64_t key = 0;
  for (char c : sha256_hex.substr(0, 16)) {
    const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    key = key << 4 | uint64_t(digit);
  }
  return key;
}

Split SplitOf(std::string_view sha256_hex, uint64_t heldout_modulus) {
  return heldout_modulus != 0 && ContentKey(sha256_hex) % heldout_modulus == 0 ? Split::kHeldOut
                                                                               : Split::kTrain;
}

std::string NormalizeText(std::string_view raw, Spacing spacing) {
  std::string out;
  out.reserve(raw.size());
  while (!raw.empty()) {
    const size_t nl = raw.find('\n');
    std::string_view line = raw.substr(0, nl);
    raw.remove_prefix(nl == std::string_view::npos ? raw.size() : nl + 1);
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF, CR CR LF
    if (IsBlank(line)) continue;
    if (spacing == Spacing::kCollapse) {
      AppendCollapsed(line, &out);
    } else {
      out.append(line);
    }
    out.push_back('\n');
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

absl::StatusOr<std::vector<Document>> CollectDocuments(const std::vector<std::string>& roots,
                                                       const CorpusFilter& filter,
                                                       DiscoveryStats* stats) {
  DiscoveryStats local;
  DiscoveryStats& s = stats ? *stats : local;
  s = DiscoveryStats();
  std::vector<std::string> paths;
  for (const std::string& root : roots)
    CACT_RETURN_IF_ERROR(AddCandidates(root, filter, &paths, &s));
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  s.candidates = paths.size();

  std::vector<Document> docs;
  absl::flat_hash_set<std::string> seen;
  std::string raw;
  for (const std::string& path : paths) {
    if (IsCompressedName(path)) {
      ++s.compressed;
      continue;
    }
    const FileRead r = ReadFileUpTo(path, filter.max_bytes, &raw);
    if (!r.ok()) {
      ++(r.too_large ? s.too_large : s.unreadable);
      continue;
    }
    if (raw.find('\0') != std::string::npos) {
      ++s.binary;
      continue;
    }
    if (!IsValidUtf8(raw)) {
      ++s.not_utf8;
      continue;
    }
    Document d;
    d.text = NormalizeText(raw, filter.spacing);
    if (d.text.empty()) {
      ++s.empty;
      continue;
    }
    d.sha256 = Sha256Hex({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()});
    if (!seen.insert(d.sha256).second) {
      ++s.duplicates;
      continue;
    }
    d.path = path;
    d.bytes = raw.size();
    d.split = SplitOf(d.sha256, filter.heldout_modulus);
    s.kept_file_bytes += d.bytes;
    s.kept_text_bytes += d.text.size();
    docs.push_back(std::move(d));
  }
  s.kept = docs.size();
  return docs;
}

std::string SplitText(std::span<const Document> docs, Split split) {
  std::string out;
  for (const Document& d : docs)
    if (d.split == split) out += d.text;
  return out;
}

absl::Status WriteTextFile(const std::string& path, std::span<const Document> docs, Split split) {
  const std::string text = SplitText(docs, split);
  return WriteFileAtomic(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

}  // namespace cact::train
