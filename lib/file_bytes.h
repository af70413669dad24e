// Read-only bytes of an input file: mmap'd (zero copy) or, for zstd input, decompressed
// into memory. `.cact.zst` is a first-class input everywhere because of this class.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cact {

class FileBytes {
 public:
  // Opens `path`; a file starting with the zstd magic is decompressed (bounded by
  // `max_decompressed` bytes so a lying frame header cannot make us allocate without limit).
  static absl::StatusOr<FileBytes> Open(const std::string& path,
                                        uint64_t max_decompressed = uint64_t{4} << 30);
  // Wraps bytes already in memory (tests, fuzzers, decompressed streams).
  static FileBytes FromBuffer(std::string name, std::vector<uint8_t> data);

  FileBytes() = default;
  FileBytes(FileBytes&&) noexcept = default;
  FileBytes& operator=(FileBytes&&) noexcept = default;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> span() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  bool decompressed() const { return decompressed_; }
  bool mapped() const { return mapping_ != nullptr; }

  // Copies `range` (a sub-span of span()) to `out`. For a mapped file it reads the file
  // (pread) instead of the mapping, so sparse random reads (engram table rows) do not keep
  // their pages in the process's resident set; the page cache still serves them.
  void ReadOut(std::span<const uint8_t> range, uint8_t* out) const;

  // For a mapped file: every page outside `hot` (sub-spans of span()) leaves the process's
  // resident set and becomes its own mapping region, advised as randomly read. Why: right
  // after a file is written, the page cache holds it in large folios, and a fault maps the
  // whole folio, up to the region's bounds; with the rarely read parts (tables, heads,
  // tokenizer) in regions of their own, reading the hot parts no longer maps them too.
  // Cold pages stay readable: a read faults them back in from the page cache. Returns the
  // cold bytes so marked (0 for in-memory bytes, or if the kernel refused the advice).
  size_t ReleaseColdPages(std::vector<std::span<const uint8_t>> hot) const;
  // For a mapped file: the whole pages inside `range` leave the resident set now (bytes
  // copied elsewhere), with no change of advice or regions (cheap to call often; a later
  // ReleaseColdPages sets those). They stay readable. Returns the bytes so released.
  size_t ReleasePages(std::span<const uint8_t> range) const;

 private:
  // Releases the whole pages inside [lo, hi) of a mapped file (advised as randomly read
  // first when `random`).
  size_t ReleaseWholePages(uintptr_t lo, uintptr_t hi, bool random) const;
  struct Mapping;  // munmaps on destruction
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool decompressed_ = false;
  std::shared_ptr<Mapping> mapping_;
  std::shared_ptr<std::vector<uint8_t>> owned_;
};

// True when `bytes` start with the zstd frame magic 28 B5 2F FD.
bool IsZstd(std::span<const uint8_t> bytes);
// Compresses with zstd at `level` (multi-threaded when `threads` > 1).
std::vector<uint8_t> ZstdCompress(std::span<const uint8_t> bytes, int level = 19, int threads = 0);

}  // namespace cact
