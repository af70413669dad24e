// Which generation of the .cact format a file is, from its tag, and the one refusal every
// program gives a generation it cannot run: CactFile::Open (Needle 2 only) returns it for a
// Needle 3 file, so cact-quant, cact-run and cact-torch all say the same line.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace cact {

// 2 (tag 0x05E12A83), 3 (tag 0x05E12A84), or 0 for anything else (fewer than 4 bytes too).
int CactGenerationOf(std::span<const uint8_t> bytes);

// "FILE: a Needle 3 file (generation 3, tag 0x05E12A84): this version runs, rebuilds and
// converts generation 2 files; cact-inspect reads generation 3" (Unimplemented).
absl::Status Generation3Refusal(const std::string& file);

}  // namespace cact
