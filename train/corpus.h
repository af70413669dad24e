// The training corpus: plain-text English documents found on disk, normalised, with exact
// duplicates dropped and a held-out split that depends only on each document's content.
//
// Discovery rule: a file named explicitly as a root is a candidate; a file found by walking
// a root directory is a candidate when its name matches one of the filter's patterns or its
// parent directory is one of the filter's whole directories, and its path matches none of the
// exclude patterns. Symlinks met during the walk
// are not followed (a root is taken as given). Candidates are sorted by path (byte order),
// so the result does not depend on the roots' order or the file system's listing order.
// A candidate is then dropped when it is compressed (by name), larger than the size cap,
// contains a NUL byte, is not valid UTF-8, is empty after normalisation, or has the same
// SHA-256 as a document kept before it (the first by path wins: no held-out document is a
// copy of a training one).
//
// The size and SHA-256 of a document are those of the file as it is on disk (checkable with
// sha256sum); the text is the normalised content the model sees.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cact::train {

enum class Split { kTrain, kHeldOut };
// "train" / "heldout", as the manifest spells them.
std::string_view SplitName(Split s);

// What normalisation does with spaces and tabs inside a line. kKeep is the committed
// reference model's corpus. kCollapse drops a line's leading spaces and tabs and its trailing
// spaces, tabs and carriage returns, and turns every inner run of spaces and tabs into one:
// Debian's copyright files align text in columns, and a small model trained on the runs
// continues a newline greedily with spaces.
enum class Spacing { kKeep, kCollapse };

struct CorpusFilter {
  // fnmatch(3) patterns on the file name (not the path).
  std::vector<std::string> name_patterns = {"copyright", "README*", "*.txt", "*.md",
                                            "NEWS",      "AUTHORS", "TODO",  "*.rst"};
  // Every regular file directly in one of these directories is a candidate.
  std::vector<std::string> whole_dirs = {"/usr/share/common-licenses"};
  // fnmatch(3) patterns on the whole path ('*' spans '/') that exclude a walked file.
  // Changelogs are lists of versions, links and commit ids rather than prose (Node.js's
  // would be 46 % of /usr/share/doc's text); Debian's own are gzipped and skipped anyway.
  std::vector<std::string> exclude_patterns = {"*/changelogs/*", "*/CHANGELOG*", "*/ChangeLog*",
                                               "*/changelog*"};
  uint64_t max_bytes = uint64_t{1} << 20;
  // A document is held out iff ContentKey(sha256) % heldout_modulus == 0 (20: 5 %;
  // 0: nothing held out).
  uint64_t heldout_modulus = 20;
  Spacing spacing = Spacing::kKeep;
};

struct Document {
  std::string path;
  uint64_t bytes = 0;  // of the file on disk
  std::string sha256;  // of the file on disk, lowercase hex
  Split split = Split::kTrain;
  std::string text;  // normalised
};

// Why candidates were dropped, for reports.
struct DiscoveryStats {
  size_t candidates = 0, kept = 0, excluded = 0, symlinks = 0, unreadable = 0, compressed = 0,
         too_large = 0, binary = 0, not_utf8 = 0, empty = 0, duplicates = 0;
  uint64_t kept_file_bytes = 0, kept_text_bytes = 0;
};

absl::StatusOr<std::vector<Document>> CollectDocuments(const std::vector<std::string>& roots,
                                                       const CorpusFilter& filter,
                                                       DiscoveryStats* stats = nullptr);

// The first 8 bytes of the SHA-256 digest as a big-endian integer, i.e. the first 16 hex
// digits of the digest read as a number (Python: int(sha256[:16], 16)). `sha256_hex` must be
// 64 hex digits.
uint64_t ContentKey(std::string_view sha256_hex);
Split SplitOf(std::string_view sha256_hex, uint64_t heldout_modulus);

// Lines split at '\n', trailing '\r's removed, lines of only spaces, tabs, '\r', '\f' and '\v'
// dropped, every kept line ending in '\n' (so normalising twice changes nothing). Blank lines
// go because the tokenizer's corpus had none (quant/data/train_tokenizers.py): '\n' is not
// one of its pieces, so every blank line would cost byte-fallback tokens that carry no
// language. With Spacing::kCollapse, spaces and tabs within lines as that value describes.
std::string NormalizeText(std::string_view raw, Spacing spacing = Spacing::kKeep);
// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view s);

// A whole regular file read into `out`, unless it is larger than `max_bytes` (then only
// `size` is set). Shared by discovery and the manifest loader.
struct FileRead {
  uint64_t size = 0;
  bool too_large = false;
  std::string error;  // strerror or what went wrong; empty when read
  bool ok() const { return !too_large && error.empty(); }
};
FileRead ReadFileUpTo(const std::string& path, uint64_t max_bytes, std::string* out);

// The concatenated normalised text of the documents of one split, in order. The held-out
// text is what `cact-run perplexity MODEL -f FILE` scores.
std::string SplitText(std::span<const Document> docs, Split split);
// SplitText written atomically (lib/atomic_file.h).
absl::Status WriteTextFile(const std::string& path, std::span<const Document> docs, Split split);

}  // namespace cact::train
