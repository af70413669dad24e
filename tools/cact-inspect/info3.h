// What cact-inspect's summary shows of a generation-3 file beyond the generation-neutral
// accounting and tensor table (info.cc prints both generations).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "formats/cact/accounting.h"
#include "formats/cact/cact3_file.h"
#include "formats/tokenizer_blob.h"
#include "nlohmann/json.hpp"

namespace cact::inspect {

// Facts computed the same way for both generations.
struct SummaryFacts {
  std::string sha256, scheme;
  Accounting accounting;
  const TokenizerBlob* tokenizer = nullptr;  // null when the blob did not parse
};

// (key, value) rows in the order of the Needle 2 summary, plus attention and support.
std::vector<std::pair<std::string, std::string>> SummaryRows3(const Cact3File& f,
                                                              const SummaryFacts& facts);
// Every header field by the exporter's name.
nlohmann::ordered_json Header3Json(const Cact3File& f);
// What the records add: global layers, gate and Monarch factor layouts, the probe heads.
nlohmann::ordered_json Layout3Json(const Cact3File& f);

}  // namespace cact::inspect
