#include "formats/cact/generation.h"

#include "absl/strings/str_format.h"
#include "formats/cact/header.h"
#include "formats/cact/header3.h"
#include "formats/le_bytes.h"

namespace cact {

int CactGenerationOf(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4) return 0;
  const uint32_t tag = LoadLE32(bytes.data());
  return tag == kCactTag ? 2 : tag == kCact3Tag ? 3 : 0;
}

absl::Status Generation3Refusal(const std::string& file) {
  return absl::UnimplementedError(absl::StrFormat(
      "%s: a Needle 3 file (generation 3, tag 0x%08X): this version runs, rebuilds and converts "
      "generation 2 files; cact-inspect reads generation 3",
      file, kCact3Tag));
}

}  // namespace cact
