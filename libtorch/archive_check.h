// Checks a TorchScript archive (.pt zip) before libtorch reads it. libtorch 1.13 trusts the
// archive: it does not check CRC-32s, and its unpickler sizes its memo table by whatever
// memo id a pickle names (a damaged LONG_BINPUT made it allocate 9 GB, fuzz_torch_import)
// and its strings by their length prefix. This check is what `cact-torch import` relies on
// to turn such damage into a clear error instead.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace cact::torchscript {

// Zip structure: end-of-central-directory record, every central directory entry and its
// local header inside the file, stored members' sizes and CRC-32s, deflated members' sizes
// plausible. Pickles (stored members named *pkl): every opcode known, every length inside
// the member, every memo id at most one past the entries made so far. `path` names the
// file in errors. Archives in ZIP64 form are passed through unchecked (libtorch writes
// them only above 4 GB).
absl::Status CheckTorchArchive(std::span<const uint8_t> zip, const std::string& path);

// The pickle rules above, on one member's bytes (`member` names it in errors).
absl::Status CheckPickle(std::span<const uint8_t> pickle, const std::string& path,
                         const std::string& member);

// TorchScript source (a code/*.py record): libtorch 1.13 dereferences a missing type when a
// class body assigns a name other than its own bookkeeping lists without an annotation
// (`  foo = [...]` instead of `  foo : Final[...] = ...`): a damaged attribute name made it
// crash (fuzz_torch_import, SIGSEGV in ScriptTypeParser::parseClassConstant). Such lines
// are rejected here.
absl::Status CheckTorchScriptSource(std::string_view code, const std::string& path,
                                    const std::string& member);

uint32_t Crc32(std::span<const uint8_t> bytes);

}  // namespace cact::torchscript
