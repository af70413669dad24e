// FileBytes::Open over arbitrary file contents (through a memfd): plain files are mapped,
// zstd frames are decompressed under a 16 MB bound; what opens is then validated as .cact.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "formats/cact/cact_file.h"
#include "fuzz_common.h"
#include "lib/file_bytes.h"

using namespace cact;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::SingleThreaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto bytes = FileBytes::Open(path, 16u << 20);
  if (bytes.ok()) {
    CACT_FUZZ_CHECK(bytes->size() <= (16u << 20) || !bytes->decompressed(), "decompression bound");
    CACT_FUZZ_CHECK(bytes->decompressed() || bytes->size() == size, "mapped size");
    auto f = CactFile::FromBytes(std::move(*bytes));
    if (f.ok()) fuzz::TouchCactFile(*f);
  } else {
    const std::string msg(bytes.status().message());
    CACT_FUZZ_CHECK(msg.rfind(path + ": ", 0) == 0, "error names the file");
  }
  close(fd);
  return 0;
}
