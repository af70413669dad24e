// Shared by the reliability tests: parse a (damaged) .cact of either generation from memory,
// check that a rejection is a well-formed format error, touch everything an accepted file
// exposes, and check cact-inspect's outcome on a damaged file against its library's.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact3_file.h"
#include "formats/cact/cact_file.h"
#include "formats/tokenizer_blob.h"
#include "lib/file_bytes.h"
#include "quant/tensor_values.h"
#include "support/test_support.h"

namespace cact::reliability {

// No single open of a ~200 KB file may take this long (a hang or a quadratic blow-up);
// a normal open takes microseconds, an ASan one well under a millisecond.
inline constexpr double kMaxSecondsPerOpen = 2.0;

// Outcome of opening one damaged buffer.
struct OpenOutcome {
  bool accepted = false;
  std::string problem;  // empty when the outcome is acceptable (clean error or a usable file)
  std::string message;  // the error message when rejected
  double seconds = 0;
};

// A rejection must be one line shaped "NAME: FIELD at offset N: WHAT" with N inside the
// buffer (the offset points at the bad field, or at the end where data is missing).
inline std::string CheckFormatErrorShape(const std::string& msg, const std::string& name,
                                         uint64_t size) {
  if (msg.find('\n') != std::string::npos) return "error spans several lines: " + msg;
  const std::string prefix = name + ": ";
  if (msg.compare(0, prefix.size(), prefix) != 0)
    return "error does not start with the file name '" + name + "': " + msg;
  // The field sits between the prefix and " at offset N: "; it must not be empty.
  const std::string at = " at offset ";
  const size_t a = msg.find(at, prefix.size());
  if (a == std::string::npos || a == prefix.size())
    return "error is not 'FILE: FIELD at offset N: WHAT': " + msg;
  size_t d = a + at.size(), e = d;
  while (e < msg.size() && msg[e] >= '0' && msg[e] <= '9') ++e;
  if (e == d || e - d > 19 || msg.compare(e, 2, ": ") != 0 || e + 2 >= msg.size())
    return "error is not 'FILE: FIELD at offset N: WHAT': " + msg;
  const uint64_t offset = std::stoull(msg.substr(d, e - d));
  if (offset > size)
    return "error offset " + std::to_string(offset) + " is past the end of the " +
           std::to_string(size) + "-byte input: " + msg;
  return "";
}

// Which numeric records an accepted file must also decode: those whose blob overlaps the
// damaged byte range [begin, end), or all of them when the damage lies in the metadata
// (before the first blob) since the header, codebook and records govern every decode.
struct DamageRange {
  uint64_t begin = 0, end = UINT64_MAX;  // default: decode everything
};

// Reads every byte an accepted file hands out: each blob, the values of the numeric records
// selected by `damage` (CQ dequantized with the file's codebook), the tokenizer.
// Returns a checksum so the reads cannot be optimised away, or sets *problem.
inline double TouchAccepted(const CactFile& f, DamageRange damage, std::string* problem) {
  double sum = 0;
  const uint8_t* base = f.bytes().data();
  const uint64_t size = f.bytes().size();
  for (const TensorEntry& t : f.tensors()) {
    std::span<const uint8_t> b = f.blob(t);
    if (b.data() < base || uint64_t(b.data() - base) + b.size() > size) {
      *problem = "blob of " + t.name + " lies outside the file";
      return sum;
    }
    for (uint8_t v : b) sum += v;
    if (t.record.dtype == DType::kRAW) continue;
    const uint64_t b0 = t.record.offset, b1 = b0 + t.record.nbytes;
    const bool metadata = damage.begin < f.tensors().front().record.offset;
    if (!metadata && (damage.end <= b0 || damage.begin >= b1)) continue;
    auto values = TensorValues(f, t);
    if (!values.ok()) {
      *problem = "accepted file but values of " + t.name + " fail: " + values.status().ToString();
      return sum;
    }
    for (float v : *values) sum += (v == v) ? v : 0;  // NaN norms are data, not a crash
  }
  auto tok = ParseTokenizerBlob(f.tokenizer_blob(), f.path(), f.tensors().back().record.offset);
  if (!tok.ok()) *problem = "accepted file but its tokenizer fails: " + tok.status().ToString();
  return sum;
}

inline const CactFile& RecordsOf(const CactFile& f) { return f; }
inline const CactFile& RecordsOf(const Cact3File& f) { return f.records(); }

// Opens `bytes` as a File (CactFile, or Cact3File for generation 3), copied into an exactly
// sized buffer so that ASan sees any overread.
template <typename File = CactFile>
OpenOutcome OpenDamaged(std::span<const uint8_t> bytes, const std::string& name,
                        DamageRange damage = {}) {
  OpenOutcome o;
  const auto t0 = std::chrono::steady_clock::now();
  auto f = File::FromBytes(FileBytes::FromBuffer(name, {bytes.begin(), bytes.end()}));
  if (f.ok()) {
    o.accepted = true;
    TouchAccepted(RecordsOf(*f), damage, &o.problem);
  } else {
    o.message = std::string(f.status().message());
    o.problem = CheckFormatErrorShape(o.message, name, bytes.size());
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

// The same damage through the CLI: `cact-inspect FILE` exits 0 when its library
// (OpenAnyGeneration) accepts the file, else 2 printing exactly one line that carries the
// library's message; `cact-inspect verify FILE` exits 0 / 1 with one line. Never a signal.
inline void CheckInspectCli(const std::string& path, const std::string& what) {
  SCOPED_TRACE(what);
  auto lib = OpenAnyGeneration(path);
  auto summary = testing::Run(testing::Tool("cact-inspect") + " " + path);
  auto verify = testing::Run(testing::Tool("cact-inspect") + " verify " + path);
  EXPECT_EQ(summary.signal, 0);
  EXPECT_EQ(verify.signal, 0);
  if (lib.ok()) {
    EXPECT_EQ(summary.exit_code, 0) << summary.output.substr(0, 500);
    EXPECT_EQ(verify.exit_code, 0) << verify.output;
    return;
  }
  const std::string msg(lib.status().message());
  EXPECT_EQ(summary.exit_code, 2) << summary.output;
  EXPECT_EQ(testing::CountLines(summary.output), 1u) << summary.output;
  EXPECT_NE(summary.output.find(msg), std::string::npos)
      << "CLI: " << summary.output << "library: " << msg;
  EXPECT_EQ(verify.exit_code, 1) << verify.output;
  EXPECT_EQ(testing::CountLines(verify.output), 1u) << verify.output;
}

}  // namespace cact::reliability
