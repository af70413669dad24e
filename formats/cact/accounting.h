// Size accounting of a .cact (the spec's "Released file, measured" table): per width class
// the tensor count, parameters (logical elements) and blob bytes, plus code-weighted width,
// FP16 group-norm bytes and bits per weight. Works on a CactFile or on bare records (a
// layout without weights).
#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "formats/cact/header.h"

namespace cact {

class CactFile;

enum class WidthClass : uint8_t { kCQ2, kCQ3, kCQ4, kCQ158, kFP16, kFP32, kRAW };
inline constexpr size_t kNumWidthClasses = 7;
const char* WidthClassName(WidthClass c);  // "CQ2", "CQ3", "CQ4", "CQ1.58", "FP16", "FP32", "RAW"
WidthClass WidthClassOf(const TensorRecord& r);
// Nominal code width of a CQ class in bits (ternary: log2(3)); 0 for the others.
double NominalCodeBits(WidthClass c);

struct ClassStats {
  uint64_t tensors = 0;
  uint64_t params = 0;  // logical elements (0 for RAW: the tokenizer is not parameters)
  uint64_t bytes = 0;   // blob bytes
};

struct Accounting {
  std::array<ClassStats, kNumWidthClasses> classes{};  // indexed by WidthClass
  uint64_t params = 0;                                 // all non-RAW logical elements
  uint64_t cq_params = 0;                              // elements of CQ matrices
  double code_weighted_bits = 0;                       // sum(CQ params x nominal width) / cq_params
  uint64_t norm_bytes = 0;                             // FP16 group norms inside CQ blobs
  uint64_t payload_bytes = 0;  // all non-RAW blob bytes (codes + norms + FP16/FP32)
  double payload_bpw = 0;      // payload_bytes * 8 / params
  uint64_t file_bytes = 0;     // whole file (0 when not given)
  double file_bpw = 0;         // file_bytes * 8 / params
  const ClassStats& operator[](WidthClass c) const { return classes[size_t(c)]; }
};

// `file_bytes` = 0 leaves the whole-file figures at 0.
Accounting ComputeAccounting(std::span<const TensorRecord> records, uint64_t file_bytes = 0);
Accounting ComputeAccounting(const CactFile& f);

// FP16 norm bytes of one CQ record (out * ceil(in / group) * 2); 0 for other dtypes.
uint64_t CqNormBytes(const TensorRecord& r);

}  // namespace cact
