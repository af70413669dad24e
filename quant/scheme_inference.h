// Recovers a bits-map rule list from a file's records: the shortest rule list (default =
// most common width, then the fewest prefixes) that reproduces every record's width.
#pragma once
#include <string>

#include "formats/cact/cact_file.h"

namespace cact {

// E.g. "embedding=4,mhc=4,default=2". Empty when the file has no CQ record. Rules match
// the way a scheme does (quant/scheme.h): the longest prefix, with `layerNN.` read as
// `attn.` (every layer).
// Generation 2: a scheme in the spec's language, which cact-quant accepts.
// Generation 3 (Cact3File::records()): the same form as a description only (Needle 3 has no
// builder here). Its layers are read as `attn.` only when every layer's record of a name has
// one width; otherwise the rules name the canonical records (`layer03.q_proj=4`), so that they
// always reproduce every record's width.
// Mixed groups are not part of a scheme; see the tensor table for them.
std::string InferScheme(const CactFile& file);

}  // namespace cact
