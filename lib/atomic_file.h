// Atomic output: write to a temporary file in the target's directory, fsync, rename into
// place. An interrupted or failed write never leaves a partial or damaged output file.
// What is not a regular file is written through, never replaced: "-" is standard output,
// and an existing character device, FIFO or socket (/dev/null, a pipe) is opened and
// written; a failed write (a full device, a closed pipe) is an error naming the path.
// An output that is an input of this process (lib/file_identity.h) is refused.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cact {

class AtomicFileWriter {
 public:
  // Creates "<dir>/.<name>.tmp.XXXXXX" next to `path` (or opens a non-regular `path`).
  static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  ~AtomicFileWriter();  // removes the temporary file unless Commit() succeeded

  absl::Status Write(std::span<const uint8_t> bytes);
  absl::Status WriteZeros(uint64_t n);
  uint64_t bytes_written() const { return written_; }
  // fsync + rename over `path` (written through: flush and close).
  absl::Status Commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  AtomicFileWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
  bool through_ = false;  // writing to `path` itself (not a regular file)
};

// Whole-buffer convenience. When `path` ends in ".zst" the bytes are zstd-compressed first.
absl::Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes,
                             int zstd_level = 19);

}  // namespace cact
