// What cact-inspect's summary shows of a generation-3 file beyond the generation-neutral
// accounting and tensor table (info.cc prints both generations).
#pragma once
#include "formats/cact/cact3_file.h"
#include "nlohmann/json.hpp"
#include "tools/cact-inspect/summary.h"

namespace cact::inspect {

// The rows in the order of the Needle 2 summary, plus support and attention; `widths` in
// place of `scheme` (facts.scheme: InferScheme over the canonical names, not a cact-quant
// scheme).
SummaryRows SummaryRows3(const Cact3File& f, const SummaryFacts& facts);
// Every header field by the exporter's name.
nlohmann::ordered_json Header3Json(const Cact3File& f);
// What the records add: global layers, gate and Monarch factor layouts, the probe heads.
nlohmann::ordered_json Layout3Json(const Cact3File& f);

}  // namespace cact::inspect
