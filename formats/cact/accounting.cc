#include "formats/cact/accounting.h"

#include <cmath>
#include <vector>

#include "formats/cact/cact_file.h"

namespace cact {

const char* WidthClassName(WidthClass c) {
  static constexpr const char* kNames[kNumWidthClasses] = {"CQ2",  "CQ3",  "CQ4", "CQ1.58",
                                                           "FP16", "FP32", "RAW"};
  return kNames[size_t(c)];
}

WidthClass WidthClassOf(const TensorRecord& r) {
  switch (r.dtype) {
    case DType::kFP16:
      return WidthClass::kFP16;
    case DType::kFP32:
      return WidthClass::kFP32;
    case DType::kRAW:
      return WidthClass::kRAW;
    case DType::kCQ:
      if (r.bits == 2) return WidthClass::kCQ2;
      if (r.bits == 3) return WidthClass::kCQ3;
      if (r.bits == 4) return WidthClass::kCQ4;
      return WidthClass::kCQ158;
  }
  return WidthClass::kRAW;
}

double NominalCodeBits(WidthClass c) {
  switch (c) {
    case WidthClass::kCQ2:
      return 2;
    case WidthClass::kCQ3:
      return 3;
    case WidthClass::kCQ4:
      return 4;
    case WidthClass::kCQ158:
      return std::log2(3.0);
    default:
      return 0;
  }
}

uint64_t CqNormBytes(const TensorRecord& r) {
  if (r.dtype != DType::kCQ || r.ndim != 2 || r.group == 0) return 0;
  const uint64_t groups = (uint64_t(r.shape[1]) + r.group - 1) / r.group;
  return uint64_t(r.shape[0]) * groups * 2;
}

Accounting ComputeAccounting(std::span<const TensorRecord> records, uint64_t file_bytes) {
  Accounting a;
  double weighted = 0;
  for (const TensorRecord& r : records) {
    const WidthClass c = WidthClassOf(r);
    ClassStats& s = a.classes[size_t(c)];
    const uint64_t params = r.NumElements();
    ++s.tensors;
    s.params += params;
    s.bytes += r.nbytes;
    if (c == WidthClass::kRAW) continue;
    a.params += params;
    a.payload_bytes += r.nbytes;
    if (r.dtype == DType::kCQ) {
      a.cq_params += params;
      weighted += double(params) * NominalCodeBits(c);
      a.norm_bytes += CqNormBytes(r);
    }
  }
  a.code_weighted_bits = a.cq_params ? weighted / double(a.cq_params) : 0;
  a.payload_bpw = a.params ? double(a.payload_bytes) * 8 / double(a.params) : 0;
  a.file_bytes = file_bytes;
  a.file_bpw = a.params ? double(file_bytes) * 8 / double(a.params) : 0;
  return a;
}

Accounting ComputeAccounting(const CactFile& f) {
  std::vector<TensorRecord> records;
  records.reserve(f.tensors().size());
  for (const TensorEntry& t : f.tensors()) records.push_back(t.record);
  return ComputeAccounting(records, f.bytes().size());
}

}  // namespace cact
