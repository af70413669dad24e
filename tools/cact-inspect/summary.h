// The summary rows that read the same for both generations; info.cc lists Needle 2's rows
// and info3.cc Needle 3's, each in its own order, with these texts.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "formats/cact/accounting.h"
#include "formats/cact/cact_file.h"
#include "formats/tokenizer_blob.h"

namespace cact::inspect {

using SummaryRows = std::vector<std::pair<std::string, std::string>>;

// Facts computed the same way for both generations.
struct SummaryFacts {
  std::string sha256, scheme;
  Accounting accounting;
  const TokenizerBlob* tokenizer = nullptr;  // null when the blob did not parse
};

// The first n entries of a header array (engram orders or sites).
template <size_t N>
std::span<const uint32_t> Used(const std::array<uint32_t, N>& a, uint32_t n) {
  return std::span(a).first(std::min<size_t>(n, N));
}

std::string FileText(const CactFile& f);  // "m.cact (1,234 bytes, decompressed from zstd)"
std::string ParametersText(const Accounting& a);
std::string EngramText(std::span<const uint32_t> sites, std::span<const uint32_t> orders,
                       uint32_t tables, uint32_t slots, uint32_t sub_dim, uint32_t conv_taps,
                       uint32_t dilation);
std::string KvCacheText(uint32_t window, uint32_t bits);
std::string CodebooksText(const CactFile& f);
std::string TokenizerText(const TokenizerBlob& t);

}  // namespace cact::inspect
