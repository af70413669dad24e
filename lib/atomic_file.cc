#include "lib/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "lib/file_bytes.h"
#include "lib/file_identity.h"
#include "lib/status.h"

namespace cact {

static std::string ErrnoText() { return std::strerror(errno); }

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  AtomicFileWriter w;
  w.path_ = path;
  if (path.empty()) return absl::InvalidArgumentError("empty output path");
  if (path == "-") {
    CACT_RETURN_IF_ERROR(CheckOutputFdIsNotInput(STDOUT_FILENO, "standard output"));
    w.fd_ = ::dup(STDOUT_FILENO);
    if (w.fd_ < 0) return FileError("standard output", "cannot write: " + ErrnoText());
    w.path_ = "standard output";
    w.through_ = true;
    return w;
  }
  CACT_RETURN_IF_ERROR(CheckOutputIsNotInput(path));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return FileError(path, "output path is a directory");
    if (!S_ISREG(st.st_mode)) {
      // A device, FIFO or socket: renaming over it would replace the node itself.
      w.fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (w.fd_ < 0) return FileError(path, "cannot open for writing: " + ErrnoText());
      w.through_ = true;
      return w;
    }
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return FileError(path, "output path names a directory");
  std::string tmpl =
      (slash == std::string::npos ? std::string() : dir) + "." + base + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) return FileError(path, "cannot create temporary output file: " + ErrnoText());
  fchmod(fd, 0644);
  w.fd_ = fd;
  w.tmp_ = buf.data();
  return w;
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_(std::move(o.tmp_)),
      fd_(o.fd_),
      written_(o.written_),
      committed_(o.committed_),
      through_(o.through_) {
  o.fd_ = -1;
  o.committed_ = true;  // the moved-from object owns nothing
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !through_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

absl::Status AtomicFileWriter::Write(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileError(path_,
                       absl::StrFormat("write failed after %d bytes: %s", written_, ErrnoText()));
    }
    p += n;
    left -= size_t(n);
    written_ += uint64_t(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::WriteZeros(uint64_t n) {
  static const uint8_t kZeros[4096] = {};
  while (n > 0) {
    size_t k = n < sizeof(kZeros) ? size_t(n) : sizeof(kZeros);
    CACT_RETURN_IF_ERROR(Write({kZeros, k}));
    n -= k;
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (through_) {
    // Pipes and most devices cannot fsync (EINVAL); a device that can reports its errors.
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP)
      return FileError(path_, "write failed: " + ErrnoText());
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return FileError(path_, "close failed: " + ErrnoText());
    committed_ = true;
    return absl::OkStatus();
  }
  // A failed commit removes its temporary file at once (the caller may keep the writer).
  auto fail = [this](const std::string& what) {
    const absl::Status st = FileError(path_, what + ErrnoText());
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    tmp_.clear();
    return st;
  };
  if (::fsync(fd_) != 0) return fail("fsync failed: ");
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return fail("close failed: ");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return fail("cannot rename temporary file into place: ");
  committed_ = true;
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes,
                             int zstd_level) {
  std::vector<uint8_t> packed;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".zst") == 0) {
    packed = ZstdCompress(bytes, zstd_level, 2);
    if (packed.empty() && !bytes.empty()) return FileError(path, "zstd compression failed");
    bytes = packed;
  }
  CACT_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  CACT_RETURN_IF_ERROR(w.Write(bytes));
  return w.Commit();
}

}  // namespace cact
