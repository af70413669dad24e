// Recovers a bits-map scheme string from a file's records: the shortest rule list (default
// = most common width, then the fewest prefixes) that reproduces every record's width.
#pragma once
#include <string>

#include "formats/cact/cact_file.h"

namespace cact {

// E.g. "embedding=4,mhc=4,default=2". Empty when the file has no CQ record.
// Mixed groups are not part of a scheme; see the tensor table for them.
std::string InferScheme(const CactFile& file);

}  // namespace cact
