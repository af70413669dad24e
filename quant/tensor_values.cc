#include "quant/tensor_values.h"

#include "lib/status.h"
#include "quant/cq/fp16.h"

namespace cact {

CqShape CqShapeOf(const TensorEntry& t) {
  CqShape s;
  s.out = uint32_t(t.rows());
  s.in = uint32_t(t.cols());
  s.group = t.record.group;
  s.bits = t.record.bits;
  return s;
}

absl::StatusOr<std::vector<float>> TensorValues(const CactFile& file, const TensorEntry& t) {
  std::span<const uint8_t> blob = file.blob(t);
  const TensorRecord& r = t.record;
  switch (r.dtype) {
    case DType::kCQ: {
      CqShape shape = CqShapeOf(t);
      std::vector<float> cb = file.CodebookFor(r.bits, r.group);
      std::vector<float> out(size_t(shape.out) * shape.in);
      DequantizeBlob(blob, shape, cb, out.data());
      return out;
    }
    case DType::kFP16: {
      std::vector<float> out(r.NumElements());
      for (size_t i = 0; i < out.size(); ++i) out[i] = LoadHalf(blob.data() + 2 * i);
      return out;
    }
    case DType::kFP32: {
      std::vector<float> out(r.NumElements());
      for (size_t i = 0; i < out.size(); ++i) out[i] = LoadF32(blob.data() + 4 * i);
      return out;
    }
    case DType::kRAW:
      break;
  }
  return FileError(file.path(), "tensor '" + t.name + "' is RAW and has no numeric values");
}

}  // namespace cact
