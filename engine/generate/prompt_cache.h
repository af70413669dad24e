// A file of saved prompt-prefix states (llama.cpp's --prompt-cache): the state of a forward
// after the tools prefix, so another process restores it instead of feeding the prefix.
// Nothing in the file is trusted: a file made for another model (by sha256), path,
// window, sink, state version or build, or one that is truncated or damaged (checksum,
// sizes, values) is never used: it is rebuilt from scratch and replaced, and the reason is
// kept for the caller to print. A file that is not a prompt cache at all is refused and
// left as it is.
//
// Layout (little-endian):
//   0   8 bytes   magic "CACTPCF\n"
//   8   u32       format version (1)
//   12  32 bytes  SHA-256 of every byte from offset 44 to the end
//   44  u32       H, then H bytes of JSON: model_sha256, path, window, sink, keep_hidden,
//                 state_version, build
//       u32       entries (at most kMaxEntries), each: u32 n, n int32 prefix ids,
//                 u64 S, S bytes of Forward::StateBytes
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cact {

// Bump when a forward path's numerics or state layout change (the build id changes with
// every commit too; this covers builds of one commit).
inline constexpr uint32_t kForwardStateVersion = 2;  // 2: integer attention scores

// What a saved state depends on besides its prefix ids.
struct PromptCacheKey {
  std::string model_sha256;  // of the model file's bytes
  std::string path;          // the forward's name(): "fast", "fast-int8", "reference"
  // sink: the pinned positions, or 0 when they are exactly the saved prefix (the default:
  // the tools prefix), whose state then does not depend on its length.
  uint32_t window = 0, sink = 0;
  bool keep_hidden = false;
  bool operator==(const PromptCacheKey&) const = default;
};

class PromptCache {
 public:
  // One saved prefix: its ids and Forward::StateBytes (a view into the file's bytes or into
  // a state stored by this process).
  struct Entry {
    std::vector<int32_t> ids;
    std::string_view state;
  };

  static constexpr size_t kMaxEntries = 8;
  static constexpr std::string_view kMagic = "CACTPCF\n";
  static constexpr uint32_t kFormatVersion = 1;

  // `build` names the program writing the file (tools: BuildId()).
  PromptCache(std::string path, std::string build)
      : path_(std::move(path)), build_(std::move(build)) {}

  // Reads the file's entries made for `key` (again whenever the key changes). A missing or
  // empty file has none; a file that is not a prompt cache (or not a regular file) is an
  // error (InvalidArgument, the file untouched); any other problem leaves no entries and
  // sets rebuild_reason(): the next Store replaces the file.
  absl::Status Load(const PromptCacheKey& key);
  // The state saved for exactly `prefix`, or null.
  const std::string_view* Find(std::span<const int32_t> prefix);
  // Adds the state of `prefix` (dropping the least recently used past kMaxEntries) and
  // writes the file atomically.
  absl::Status Store(std::span<const int32_t> prefix, std::string state);
  // A state from the file that its forward refused (StateFromBytes): nothing else in the
  // file is used either; the next Store replaces it.
  void Distrust(std::string reason);

  const std::string& path() const { return path_; }
  // Why the file on disk could not be used ("made for another model ..."); empty when it
  // was used or absent.
  const std::string& rebuild_reason() const { return rebuild_reason_; }
  uint64_t file_bytes() const { return file_bytes_; }

  // The file's bytes for `key` and `entries` (tests and the fuzzer build files with it).
  static std::string Serialize(const PromptCacheKey& key, const std::string& build,
                               const std::list<Entry>& entries);
  // Parses `bytes` (named `name` in errors): the key and build it records and its entries
  // (views into `bytes`).
  // Errors are DataLoss with the field and offset; InvalidArgument when the magic is wrong.
  struct Parsed {
    PromptCacheKey key;
    std::string build;
    uint32_t state_version = 0;
    std::list<Entry> entries;
  };
  static absl::StatusOr<Parsed> Parse(std::string_view bytes, const std::string& name);

 private:
  std::string path_, build_;
  PromptCacheKey key_;
  bool loaded_ = false;
  std::list<Entry> entries_;       // most recent first
  std::unique_ptr<char[]> file_;   // the bytes read (entries from the file point into them)
  std::list<std::string> stored_;  // states stored by this process
  std::string rebuild_reason_;
  uint64_t file_bytes_ = 0;
};

}  // namespace cact
