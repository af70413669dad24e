#include "formats/cact/any_generation.h"

#include "formats/cact/generation.h"
#include "lib/status.h"

namespace cact {

absl::StatusOr<AnyCactFile> OpenAnyGeneration(const std::string& path) {
  CACT_ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Open(path));
  AnyCactFile f;
  if (CactGenerationOf(bytes.span()) == 3) {
    CACT_ASSIGN_OR_RETURN(Cact3File g3, Cact3File::FromBytes(std::move(bytes)));
    f.gen3.emplace(std::move(g3));
  } else {
    CACT_ASSIGN_OR_RETURN(CactFile g2, CactFile::FromBytes(std::move(bytes)));
    f.gen2.emplace(std::move(g2));
  }
  return f;
}

}  // namespace cact
