#include "lib/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lib/file_identity.h"
#include "lib/status.h"

namespace cact {

struct FileBytes::Mapping {
  void* addr = nullptr;
  size_t len = 0;
  int fd = -1;  // kept open for ReadOut: the same inode as the mapping
  ~Mapping() {
    if (addr && len) munmap(addr, len);
    if (fd >= 0) ::close(fd);
  }
};

bool IsZstd(std::span<const uint8_t> b) {
  return b.size() >= 4 && b[0] == 0x28 && b[1] == 0xB5 && b[2] == 0x2F && b[3] == 0xFD;
}

static absl::StatusOr<std::vector<uint8_t>> Decompress(const std::string& path,
                                                       std::span<const uint8_t> in,
                                                       uint64_t max_out) {
  std::vector<uint8_t> out;
  ZSTD_DStream* ds = ZSTD_createDStream();
  if (!ds) return FileError(path, "zstd: out of memory");
  ZSTD_initDStream(ds);
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  size_t chunk = ZSTD_DStreamOutSize();
  size_t ret = 1;
  while (ib.pos < ib.size || ret != 0) {
    size_t old = out.size();
    if (old + chunk > max_out) {
      ZSTD_freeDStream(ds);
      return FileError(
          path, absl::StrFormat("zstd: decompressed size exceeds the %d byte limit", max_out));
    }
    out.resize(old + chunk);
    ZSTD_outBuffer ob{out.data() + old, chunk, 0};
    size_t before_in = ib.pos;
    ret = ZSTD_decompressStream(ds, &ob, &ib);
    out.resize(old + ob.pos);
    if (ZSTD_isError(ret)) {
      ZSTD_freeDStream(ds);
      return FormatError(path, "zstd frame", before_in, ZSTD_getErrorName(ret));
    }
    if (ib.pos == ib.size && ob.pos == 0 && ret != 0) {
      ZSTD_freeDStream(ds);
      return FormatError(path, "zstd frame", ib.pos, "truncated compressed stream");
    }
  }
  ZSTD_freeDStream(ds);
  return out;
}

absl::StatusOr<FileBytes> FileBytes::Open(const std::string& path, uint64_t max_decompressed) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return FileError(path, "not a regular file");
  }
  NoteInput(path);
  FileBytes fb;
  fb.path_ = path;
  size_t len = static_cast<size_t>(st.st_size);
  if (len == 0) {
    ::close(fd);
    static const uint8_t kEmpty = 0;
    fb.data_ = &kEmpty;
    fb.size_ = 0;
    return fb;
  }
  void* addr = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    ::close(fd);
    return FileError(path, std::string("mmap failed: ") + std::strerror(errno));
  }
  fb.mapping_ = std::make_shared<Mapping>();
  fb.mapping_->addr = addr;
  fb.mapping_->len = len;
  fb.mapping_->fd = fd;
  fb.data_ = static_cast<const uint8_t*>(addr);
  fb.size_ = len;
  if (IsZstd(fb.span())) {
    auto out = Decompress(path, fb.span(), max_decompressed);
    if (!out.ok()) return out.status();
    fb.mapping_.reset();
    fb.owned_ = std::make_shared<std::vector<uint8_t>>(std::move(*out));
    fb.data_ = fb.owned_->data();
    fb.size_ = fb.owned_->size();
    fb.decompressed_ = true;
  }
  return fb;
}

void FileBytes::ReadOut(std::span<const uint8_t> range, uint8_t* out) const {
  const size_t offset = size_t(range.data() - data_);
  if (mapping_) {
    size_t done = 0;
    while (done < range.size()) {
      const ssize_t n = pread(mapping_->fd, out + done, range.size() - done, off_t(offset + done));
      if (n <= 0) break;
      done += size_t(n);
    }
    if (done == range.size()) return;
  }
  std::memcpy(out, range.data(), range.size());  // in memory, or pread failed
}

size_t FileBytes::ReleaseWholePages(uintptr_t lo, uintptr_t hi, bool random) const {
  if (!mapping_) return 0;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  lo = (lo + page - 1) / page * page;
  hi = hi / page * page;
  if (hi <= lo) return 0;
  void* p = reinterpret_cast<void*>(lo);
  if ((random && madvise(p, hi - lo, MADV_RANDOM) != 0) || madvise(p, hi - lo, MADV_DONTNEED) != 0)
    return 0;
  return hi - lo;
}

size_t FileBytes::ReleasePages(std::span<const uint8_t> range) const {
  const uintptr_t base = uintptr_t(data_), end = base + size_;
  return ReleaseWholePages(std::clamp(uintptr_t(range.data()), base, end),
                           std::clamp(uintptr_t(range.data() + range.size()), base, end),
                           /*random=*/false);
}

size_t FileBytes::ReleaseColdPages(std::vector<std::span<const uint8_t>> hot) const {
  if (!mapping_) return 0;
  const uintptr_t base = uintptr_t(data_), end = base + size_;
  std::sort(hot.begin(), hot.end(),
            [](const auto& a, const auto& b) { return a.data() < b.data(); });
  size_t released = 0;
  // Cold run [lo, hi): whole pages strictly between hot ranges (a page holding any hot
  // byte stays hot).
  auto release = [&](uintptr_t lo, uintptr_t hi) {
    released += ReleaseWholePages(lo, hi, /*random=*/true);
  };
  uintptr_t cursor = base;
  for (const auto& h : hot) {
    const uintptr_t lo = std::clamp(uintptr_t(h.data()), base, end);
    const uintptr_t hi = std::clamp(uintptr_t(h.data() + h.size()), base, end);
    if (lo > cursor) release(cursor, lo);
    cursor = std::max(cursor, hi);
  }
  release(cursor, end);
  return released;
}

FileBytes FileBytes::FromBuffer(std::string name, std::vector<uint8_t> data) {
  FileBytes fb;
  fb.path_ = std::move(name);
  fb.owned_ = std::make_shared<std::vector<uint8_t>>(std::move(data));
  fb.data_ = fb.owned_->data();
  fb.size_ = fb.owned_->size();
  return fb;
}

std::vector<uint8_t> ZstdCompress(std::span<const uint8_t> bytes, int level, int threads) {
  ZSTD_CCtx* cc = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
  if (threads > 1) ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, threads);
  ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
  std::vector<uint8_t> out(ZSTD_compressBound(bytes.size()));
  size_t n = ZSTD_compress2(cc, out.data(), out.size(), bytes.data(), bytes.size());
  ZSTD_freeCCtx(cc);
  if (ZSTD_isError(n)) return {};
  out.resize(n);
  return out;
}

}  // namespace cact
