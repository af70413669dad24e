// Opens a .cact of either generation, for the reader that shows both (cact-inspect); every
// other program opens through CactFile::Open, which refuses generation 3.
#pragma once
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "formats/cact/cact3_file.h"
#include "formats/cact/cact_file.h"

namespace cact {

struct AnyCactFile {
  std::optional<CactFile> gen2;   // a Needle 2 file
  std::optional<Cact3File> gen3;  // a Needle 3 file

  int generation() const { return gen3 ? 3 : 2; }
  // The records, blobs and codebooks of either (Cact3File::records() for generation 3).
  const CactFile& records() const { return gen3 ? gen3->records() : *gen2; }
};

// Maps (or decompresses) once; the tag picks the validator. Errors are the validator's.
absl::StatusOr<AnyCactFile> OpenAnyGeneration(const std::string& path);

}  // namespace cact
